defmodule Callbox do
  @moduledoc """
  Untrusted tensor callbacks in WebAssembly sandboxes, from Elixir: a NIF
  over libcallbox's C API.

      {:ok, host} = Callbox.open("callbox.yaml")
      x = Callbox.Tensor.from_list([1.0, -2.0, 3.5, 0.0], {:f, 32})
      factor = Callbox.Tensor.scalar(2.5, {:f, 32})
      {:ok, [y]} = Callbox.call(host, "scale", [x, factor])
      Callbox.Tensor.to_list(y)  #=> [2.5, -5.0, 8.75, 0.0]

      {:error, %Callbox.Error{kind: :timeout, code: :deadline_exceeded, callback: "spin"}} =
        Callbox.call(host, "spin", [x])

  Tensors are `Callbox.Tensor` structs (a binary, an Nx-style type and a
  shape tuple), `{binary, type, shape}` tuples, or, where Nx is loaded,
  `Nx.Tensor`s (see `Callbox.Nx`). Results are `Callbox.Tensor`s.

  A call runs first on the caller's own scheduler for a slice of at most
  `:inline_us` microseconds (a tiny call ends there), then, if it is not
  over, on a thread of libcallbox's while the caller waits in `receive`
  (chain calls, `inline_us: 0`, `async: true` and a `:timeout` go there at
  once): a guest runs up to its timeout, no normal scheduler waits longer
  than the slice, and no scheduler of any kind is held while a guest runs.
  A calling process is monitored (once, on its first call): a caller
  killed mid-call has its guest canceled within milliseconds. A host may
  be shared by any number of processes. A host that is garbage-collected
  is closed (on a background thread); `close/1` closes one at once.
  """

  alias Callbox.{Chain, Error, Native, Tensor}

  defmodule Host do
    @moduledoc "An open host: loaded callbacks and their sandboxes (a NIF resource)."
    defstruct [:ref]
    @type t :: %__MODULE__{ref: reference()}

    defimpl Inspect do
      def inspect(_host, _opts), do: "#Callbox.Host<>"
    end
  end

  defmodule Callback do
    @moduledoc """
    A loaded callback: name, content id (`"cb1-<64 hex>"`: module bytes,
    export and signature), signature text, engine (`"wazero"` or
    `"wasmtime"`), batching rule, its input and output counts, and its
    limits as the host enforces them (C API 1.5, `callbox_callback_limits`):
    a map of `timeout_ns` (0: none), `max_memory` (bytes), `fuel` (0:
    unlimited), `max_stack` (bytes of wasm stack; 0: the engine's default),
    `max_output` (bytes), `caller_stack`: the native stack a thread
    calling it must have, 0 when any thread will do (wazero; wasmtime on
    Linux, on x86-64 or with glibc, where the library switches
    stacks), `max_wait_ns` (how
    long a call waits for a busy callback's instance; 0: no bound) and
    `max_cpu_ns` (the CPU time one call may use; 0: none; C API 1.7).
    """
    defstruct [:name, :id, :signature, :engine, :batching, :num_inputs, :num_outputs, :limits]
  end

  @type host :: Host.t()
  @type tensor :: Tensor.t() | {binary(), Tensor.type(), tuple()} | struct()
  @type result(t) :: {:ok, t} | {:error, Error.t()}

  # How long a call may run on the caller's scheduler before it moves to a
  # library thread (call/4: inline_us), in microseconds.
  @default_inline_us 100

  # The options call/4 and call_many/3 take.
  @call_options [:inline_us, :cancel, :async, :timeout]
  @many_options [:inline_us, :cancel, :async]

  # ---- hosts ----

  @doc """
  Opens a host and loads every callback it lists.

  `config` is a path to a config file (`.yaml`, `.yml`, `.toml`, `.json`;
  `CALLBOX_` environment overrides apply), or the configuration itself as
  a map or keyword list (sent to libcallbox as JSON). Options for a map:
  `:base_dir`, the directory relative module paths are resolved against
  (default: the working directory).

      Callbox.open(%{callbacks: %{scale: %{module: "rust-scale.wasm"}}}, base_dir: "guests/prebuilt")
  """
  @spec open(Path.t() | map() | keyword(), keyword()) :: result(host)
  def open(config, opts \\ [])

  def open(path, _opts) when is_binary(path), do: wrap_host(Native.open(Path.expand(path)))

  def open(config, opts) when is_map(config) or is_list(config),
    do: open_config(Callbox.JSON.encode!(config), "json", opts)

  @doc """
  Opens a host from configuration text: `format` is `"yaml"`, `"json"` or
  `"toml"`; option `:base_dir` as for `open/2`.
  """
  @spec open_config(String.t(), String.t(), keyword()) :: result(host)
  def open_config(text, format, opts \\ []) when is_binary(text) and is_binary(format) do
    base = opts[:base_dir] && Path.expand(opts[:base_dir])
    wrap_host(Native.open_config(text, format, base))
  end

  @doc "`open/2`, raising `Callbox.Error`."
  def open!(config, opts \\ []), do: bang(open(config, opts))

  defp wrap_host({:ok, ref}), do: {:ok, %Host{ref: ref}}
  defp wrap_host({:error, e}), do: {:error, Error.from_native(e)}

  @doc """
  Closes a host now: waits for its calls and taps in flight, then releases
  it. Later calls fail with kind `:failed_precondition`. Closing twice is
  fine; a host never closed is closed when it is garbage-collected.
  """
  @spec close(host) :: :ok | {:error, Error.t()}
  def close(host), do: on_host(host, "", &ok(Native.close(&1)))

  @doc "The loaded callbacks, sorted by name."
  @spec callbacks(host) :: result([Callback.t()])
  def callbacks(host) do
    on_host(host, "", fn ref ->
      case Native.callbacks(ref) do
        {:ok, list} -> {:ok, Enum.map(list, &callback_struct/1)}
        {:error, e} -> {:error, Error.from_native(e)}
      end
    end)
  end

  @doc "The callback with this name or content id."
  @spec callback(host, String.t()) :: result(Callback.t())
  def callback(host, name_or_id) do
    on_host(host, name_or_id, fn ref ->
      case Native.callback(ref, name_or_id) do
        {:ok, info} -> {:ok, callback_struct(info)}
        {:error, e} -> {:error, Error.from_native(e)}
      end
    end)
  end

  defp callback_struct({name, id, sig, engine, batching, nin, nout, limits}) do
    %Callback{
      name: name,
      id: id,
      signature: sig,
      engine: engine,
      batching: batching,
      num_inputs: nin,
      num_outputs: nout,
      limits: limits
    }
  end

  @doc """
  The result types of calling `callback` on inputs of these types
  (tensors, or `{type, shape}` pairs): `{:ok, [{type, shape}]}`. The
  signature is the library's to read (`callbox_output_types`).
  """
  @spec output_types(host, String.t(), [tensor | {Tensor.type(), tuple()}]) :: result([{Tensor.type(), tuple()}])
  def output_types(host, callback, inputs) do
    types =
      Enum.map(inputs, fn
        {type, shape} when is_tuple(type) and is_tuple(shape) -> {Tensor.dtype_name!(type), shape}
        t -> t |> native_input() |> Tuple.delete_at(0)
      end)

    on_host(host, callback, fn ref ->
      case Native.output_types(ref, callback, types) do
        {:ok, list} -> {:ok, Enum.map(list, fn {name, shape} -> {Tensor.type_of(name), shape} end)}
        {:error, e} -> {:error, Error.from_native(e)}
      end
    end)
  end

  # ---- calls ----

  @doc """
  Calls a callback (a name or a content id) on `inputs` and returns its
  results: `{:ok, [%Callbox.Tensor{}]}` or `{:error, %Callbox.Error{}}`.

  Where the call runs: it starts on the caller's own (normal) scheduler,
  held to a slice of `inline_us` microseconds (default
  #{@default_inline_us}); a call that finishes within it costs no
  hand-off. One that outruns it is stopped and run again from the start
  on a thread of libcallbox's (`callbox_request_async`), where it may use
  its whole timeout while the calling process waits in `receive`, holding
  no scheduler (the stopped attempt wrote nothing, but its instance is
  replaced, so state a pooled instance kept from earlier calls is lost,
  and guest log lines it wrote may appear twice); the next calls of the
  same callback and input types then go straight to a library thread (2
  after one such call, doubling with each in a row, up to 1024). Chain
  calls, which must run exactly once, always go straight there, as every
  call does with `inline_us: 0`, `async: true` or a `:timeout`. A wasmtime
  guest needs a big native stack: libcallbox provides one on Linux with
  glibc and on x86-64 Linux; elsewhere (musl off x86-64) a wasmtime call
  goes to a library thread, whose stack the library sizes.

  Results of 65 bytes to 4 KiB share 32 KiB blocks (one per scheduler
  thread, filled in order): a result kept alive keeps its block alive, as
  a sub-binary keeps its parent; `:binary.copy/1` one you keep for long
  (elixir/README.md, "Where results live").

  Options:
    * `:timeout` - milliseconds (a positive integer) or `:infinity`
      (default): the most this call may take, counted from now, waiting
      for a busy callback's instance included; a call it stops fails with
      kind `:timeout` and writes nothing. It can only shorten the
      callback's own timeout (from the config). The library judges the
      value (at most an hour).
    * `:cancel` - a token from `cancel_token/0`: firing it with `cancel/1`
      stops the call within milliseconds (kind `:canceled`).
    * `:inline_us` - the slice above, 0 to 1000000 (0: no slice).
    * `async: true` - no slice: the same as `inline_us: 0`. (The NIF then
      hands the call over from the normal scheduler and polls up to 20 µs
      for its end, else the reply is a message tagged with a fresh
      reference, which the process never sees.)

  Any other option is refused, naming it.
  """
  @spec call(host, String.t(), [tensor], keyword()) :: result([Tensor.t()])
  def call(host, callback, inputs, opts \\ [])

  # No options, the common case: no option lookups.
  def call(%Host{ref: ref}, callback, inputs, []) when is_binary(callback) do
    sync_call(ref, callback, inputs, nil, @default_inline_us * 1000)
  end

  def call(%Host{ref: ref}, callback, inputs, opts) do
    do_call(ref, nil, callback, inputs, opts)
  end

  def call(host, callback, _inputs, _opts), do: {:error, not_a_host(host, callback)}

  @doc "`call/4`, returning the results or raising `Callbox.Error`."
  @spec call!(host, String.t(), [tensor], keyword()) :: [Tensor.t()]
  def call!(host, callback, inputs, opts \\ []), do: bang(call(host, callback, inputs, opts))

  @doc """
  Makes several calls of one callback, in order, in one trip to a dirty
  scheduler: `input_lists` is a list of input lists, one per call. Returns
  `{:ok, [results]}` (one result list per call), or `{:error, index, error}`
  for the first call that failed (the calls before it ran; the ones after
  it did not). A dirty scheduler trip costs more than a small call itself
  (elixir/README.md), so many small calls are much cheaper this way.
  Options as `call/4`.
  """
  @spec call_many(host, String.t(), [[tensor]], keyword()) ::
          {:ok, [[Tensor.t()]]} | {:error, non_neg_integer(), Error.t()}
  def call_many(host, callback, input_lists, opts \\ [])

  def call_many(%Host{} = host, callback, input_lists, opts) do
    callback =
      try do
        callback_name!(callback)
      catch
        :throw, {:callbox_bad_input, e} -> throw({:callbox_bad_input_at, 0, e})
      end

    try do
      check_options!(callback, opts, @many_options)
    catch
      :throw, {:callbox_bad_input, e} -> throw({:callbox_bad_input_at, 0, e})
    end

    natives =
      input_lists
      |> Enum.with_index()
      |> Enum.map(fn {inputs, i} ->
        try do
          native_inputs(callback, inputs)
        catch
          :throw, {:callbox_bad_input, e} -> throw({:callbox_bad_input_at, i, e})
        end
      end)

    reply =
      on_host(host, callback, fn ref ->
        case Native.call_many(ref, nil, callback, natives, token(opts), guard()) do
          {:ok, outs} -> {:ok, Enum.map(outs, fn list -> Enum.map(list, &output/1) end)}
          {:error, index, e} -> {:error, index, Error.from_native(e)}
        end
      end)

    with {:error, %Error{} = e} <- reply, do: {:error, 0, e}
  catch
    :throw, {:callbox_bad_input_at, i, e} -> {:error, i, e}
  end

  def call_many(host, callback, _input_lists, _opts), do: {:error, 0, not_a_host(host, callback)}

  # The calling process's guard (Callbox.Native.new_guard/0: a monitor on
  # the process that cancels its call in flight if it dies), made on its
  # first call and kept in its process dictionary.
  defp guard do
    case Process.get(:"$callbox_guard") do
      nil ->
        g = Native.new_guard()
        Process.put(:"$callbox_guard", g)
        g

      g ->
        g
    end
  end

  # The inline slice in ns: none for chain calls (an ordered step must
  # run exactly once, and a slice may run it twice) and async: true.
  defp inline_ns(callback, nil, opts) do
    case Keyword.get(opts, :inline_us, @default_inline_us) do
      us when is_integer(us) and us >= 0 and us <= 1_000_000 ->
        if opts[:async] == true, do: 0, else: us * 1000

      us ->
        throw({:callbox_bad_input, Error.invalid_argument(callback, "inline_us: #{inspect(us)}: give microseconds, 0 to 1000000")})
    end
  end

  defp inline_ns(_callback, _chain, _opts), do: 0

  # The caller's limit on the call (option :timeout, in ms): nil, or
  # {start, ns}, start the call's beginning on the monotonic clock. The
  # library judges the value (callbox_request's budget_ns); a non-integer
  # is refused here, as it cannot be passed.
  defp deadline(callback, opts) do
    case Keyword.get(opts, :timeout, :infinity) do
      :infinity ->
        nil

      ms when is_integer(ms) and ms > 0 ->
        {System.monotonic_time(:nanosecond), ms * 1_000_000}

      other ->
        throw({:callbox_bad_input,
               Error.invalid_argument(callback, "timeout: #{inspect(other)}: give milliseconds (a positive integer) or :infinity")})
    end
  end

  # What is left of the caller's limit now, for the library (0: none; at
  # least 1 ns when it has passed, so that the library reports the
  # Timeout).
  defp budget_ns(nil), do: 0
  defp budget_ns({start, ns}), do: max(ns - (System.monotonic_time(:nanosecond) - start), 1)

  defp token(opts) do
    case opts[:cancel] do
      nil -> nil
      {:callbox_cancel_token, t} -> t
    end
  end

  # Options are checked, not ignored: a misspelled or unsupported one is
  # refused as an invalid argument naming it.
  defp check_options!(callback, opts, allowed \\ @call_options) do
    case Keyword.keys(opts) -- allowed do
      [] ->
        :ok

      unknown ->
        throw({:callbox_bad_input,
               Error.invalid_argument(callback, "unknown option(s) #{inspect(unknown)}: this takes #{inspect(allowed)}")})
    end
  end

  @doc false
  def do_call(ref, chain, callback, inputs, opts) do
    callback = callback_name!(callback)
    check_options!(callback, opts)
    deadline = deadline(callback, opts)

    # A call with a :timeout goes to a library thread at once: the library
    # then judges the timeout's value, and counts it from the start.
    case inline_ns(callback, chain, opts) do
      inline_ns when inline_ns > 0 and deadline == nil -> sync_call(ref, callback, inputs, token(opts), inline_ns)
      _ -> threaded_call(ref, chain, callback, native_inputs(callback, inputs), token(opts), deadline)
    end
  catch
    :throw, {:callbox_bad_input, e} -> {:error, e}
  end

  # An unordered call: first on the caller's scheduler within the slice;
  # one the NIF does not finish there (:continue) goes to a library
  # thread, from the start. Callbox.Tensor structs go to the NIF as their
  # fields, as they are, and come back as {data, type, shape}; other
  # tensors are converted first. (The BEAM reads and builds structs
  # several times faster than a NIF's map functions: elixir/README.md,
  # Performance.)
  defp sync_call(ref, callback, inputs, token, inline_ns) do
    natives = struct_fields(inputs) || native_inputs(callback, inputs)

    case Native.call(ref, nil, callback, natives, token, nil, inline_ns) do
      {:ok, outs} -> {:ok, tensors(outs)}
      {:error, e} -> {:error, Error.from_native(e)}
      :continue -> threaded_call(ref, nil, callback, natives, token, nil)
    end
  rescue
    # The NIF refused a term it cannot read (badarg): say which, as the
    # documented {:error, %Callbox.Error{}}, never a bare ArgumentError.
    ArgumentError ->
      if host_ref?(ref),
        do: {:error, Error.invalid_argument(to_string_safe(callback), explain_badarg(callback, inputs))},
        else: {:error, not_a_host(%Host{ref: ref}, callback)}
  catch
    :throw, {:callbox_bad_input, e} -> {:error, e}
  end

  # A callback name: a binary, or an atom (a config written as an Elixir
  # map has atom keys), without NUL bytes.
  defp callback_name!(name) when is_atom(name) and name not in [nil, true, false],
    do: callback_name!(Atom.to_string(name))

  defp callback_name!(name) when is_binary(name) do
    if String.contains?(name, <<0>>) do
      throw({:callbox_bad_input, Error.invalid_argument(inspect(name), "a callback name with a NUL byte")})
    end

    name
  end

  defp callback_name!(other),
    do: throw({:callbox_bad_input, Error.invalid_argument("", "callback name #{inspect(other)}: give a string (or an atom)")})

  defp to_string_safe(name) when is_binary(name), do: name
  defp to_string_safe(name), do: inspect(name)

  # Why the NIF could not read the call's terms: the first bad input.
  defp explain_badarg(callback, inputs) do
    with :ok <- explain_name(callback),
         :ok <- explain_inputs(inputs) do
      "the call's arguments could not be read"
    end
  end

  defp explain_name(name) when is_binary(name) do
    if String.contains?(name, <<0>>), do: "callback name #{inspect(name)} has a NUL byte", else: :ok
  end
  defp explain_name(name), do: "callback name #{inspect(name)}: give a string"

  defp explain_inputs(inputs) when not is_list(inputs), do: "inputs #{inspect(inputs)}: give a list of tensors"

  defp explain_inputs(inputs) do
    inputs
    |> Enum.with_index()
    |> Enum.find_value(:ok, fn {t, i} ->
      case explain_tensor(t) do
        :ok -> nil
        why -> "input #{i}: #{why}"
      end
    end)
  end

  defp explain_tensor(%Tensor{data: data}) when not is_binary(data), do: "data #{inspect(data, limit: 5)} is not a binary"
  defp explain_tensor(%Tensor{shape: shape}) when not is_tuple(shape), do: "shape #{inspect(shape)} is not a tuple"

  defp explain_tensor(%Tensor{type: type, shape: shape}) do
    try do
      Tensor.dtype_name!(type)
      explain_dims(shape)
    rescue
      e in ArgumentError -> Exception.message(e)
    end
  end

  defp explain_tensor(_), do: :ok

  defp explain_dims(shape) do
    # The NIF reads each dimension as a signed 64-bit integer (the library
    # judges its value: a negative one is refused there, with its message).
    case Enum.find(Tuple.to_list(shape), fn d -> not (is_integer(d) and d >= -9_223_372_036_854_775_808 and d <= 9_223_372_036_854_775_807) end) do
      nil -> :ok
      d -> "dimension #{inspect(d)} is not a 64-bit integer"
    end
  end

  # [{data, type, shape}] of a list of Callbox.Tensor structs, or nil.
  defp struct_fields([%Tensor{data: data, type: type, shape: shape} | rest]) do
    case struct_fields(rest) do
      nil -> nil
      fields -> [{data, type, shape} | fields]
    end
  end

  defp struct_fields([]), do: []
  defp struct_fields(_), do: nil

  defp tensors([{data, type, shape} | rest]), do: [%Tensor{data: data, type: type, shape: shape} | tensors(rest)]
  defp tensors([]), do: []

  # The call runs on a library thread (callbox_request_async, under the
  # caller's guard and what is left of its :timeout); the NIF replies
  # itself when the call is over within its short poll, else the reply
  # arrives as {tag, reply} while the caller waits in receive, holding no
  # scheduler.
  defp threaded_call(ref, chain, callback, natives, token, deadline) do
    tag = make_ref()

    on_host(%Host{ref: ref}, callback, fn ref ->
      reply =
        case Native.call_async(ref, chain, callback, natives, token, guard(), tag, budget_ns(deadline)) do
          :ok ->
            receive do
              {^tag, reply} -> reply
            end

          reply ->
            reply
        end

      case reply do
        {:ok, outs} -> {:ok, Enum.map(outs, &output/1)}
        {:error, e} -> {:error, Error.from_native(e)}
      end
    end)
  rescue
    # As in sync_call: a term the NIF cannot read is the documented
    # {:error, %Callbox.Error{}} naming it, never a bare ArgumentError.
    ArgumentError ->
      if host_ref?(ref),
        do: {:error, Error.invalid_argument(to_string_safe(callback), explain_natives(natives))},
        else: {:error, not_a_host(%Host{ref: ref}, callback)}
  end

  # Why the NIF could not read the native inputs ({data, type, shape}).
  defp explain_natives(natives) do
    natives
    |> Enum.with_index()
    |> Enum.find_value("the call's arguments could not be read", fn
      {{data, _, _}, i} when not is_binary(data) -> "input #{i}: data #{inspect(data, limit: 5)} is not a binary"
      {{_, _, shape}, i} when not is_tuple(shape) -> "input #{i}: shape #{inspect(shape)} is not a tuple"
      {{_, _, shape}, i} ->
        case explain_dims(shape) do
          :ok -> nil
          why -> "input #{i}: #{why}"
        end
    end)
  end

  @doc """
  Runs a callback for its side effect, asynchronously and unordered: the
  inputs are copied before it returns, the results discarded; its error
  (if any) comes from the next `barrier/1`.
  """
  @spec tap(host, String.t(), [tensor]) :: :ok | {:error, Error.t()}
  def tap(%Host{ref: ref}, callback, inputs), do: do_tap(ref, nil, callback, inputs)
  def tap(host, callback, _inputs), do: {:error, not_a_host(host, callback)}

  @doc false
  def do_tap(ref, chain, callback, inputs) do
    natives = native_inputs(callback, inputs)
    on_host(%Host{ref: ref}, callback, &ok(Native.tap(&1, chain, callback, natives)))
  catch
    :throw, {:callbox_bad_input, e} -> {:error, e}
  end

  @doc "Waits for every `tap/3` and returns the first error among them since the previous barrier."
  @spec barrier(host) :: :ok | {:error, Error.t()}
  def barrier(host), do: on_host(host, "", &ok(Native.barrier(&1, nil)))

  @doc """
  The ordered chain `name` on `host` (the same name is the same chain,
  from any process, and the same chain as XLA handlers naming it): see
  `Callbox.Chain`.
  """
  @spec chain(host, String.t()) :: Chain.t()
  def chain(%Host{} = host, name) when is_binary(name), do: %Chain{host: host, name: name}

  # ---- cancellation, default host, logs, library ----

  @doc "A cancel token for `call/4`'s `:cancel` option (freed when garbage-collected)."
  def cancel_token do
    case Native.cancel_token() do
      {:ok, t} -> {:callbox_cancel_token, t}
      {:error, e} -> raise Error.from_native(e)
    end
  end

  @doc "Fires a token: the calls made with it that are in flight now fail with kind `:canceled`."
  def cancel({:callbox_cancel_token, t}), do: ok(Native.cancel(t))

  @doc """
  Makes `host` the default host (`nil` clears it): the host libcallbox's
  XLA FFI handlers (`callbox_xla_ffi`, target name `"callbox"`) call.
  """
  def set_default_host(nil), do: ok(Native.set_default_host(nil))
  def set_default_host(host), do: on_host(host, "", &ok(Native.set_default_host(&1)))

  @doc """
  Sends the library's log lines (guest `callbox_log` output, a WASI
  guest's stdout and stderr, the library's warnings) at `min_level` or
  above (`:debug`, `:info`, `:warn`, `:error`) to `pid` as
  `{:callbox_log, level, callback, message}` (level: slog's number, -4
  debug, 0 info, 4 warn, 8 error). `nil` restores stderr.
  """
  def route_logs(pid, min_level \\ :info)
  def route_logs(nil, _), do: ok(Native.set_log_process(nil, 0))

  def route_logs(pid, min_level) when is_pid(pid),
    do: ok(Native.set_log_process(pid, Map.fetch!(%{debug: -4, info: 0, warn: 4, error: 8}, min_level)))

  @doc """
  The dtypes libcallbox has (`callbox_dtypes`): maps with `:name`
  (`:f32`), `:type` (`{:f, 32}`), `:bytes`, `:dlpack` (`{code, bits}`)
  and `:xla` (the XLA PrimitiveType number).
  """
  def dtypes, do: Tensor.tables().infos

  @doc "The loaded libcallbox's version, e.g. `\"1.3.0\"`."
  def version do
    case Native.version() do
      {:ok, v} -> v
      {:error, why} -> raise Error.from_native({19, 9, 0, 0, "FailedPrecondition", "", "", why, "", why, "", 0, "", []})
    end
  end

  # ---- helpers ----

  # A host argument that is not an open host: a %Host{} not made by
  # open/2 (whose ref the NIF does not know), a cancel token passed as the
  # host, anything else.
  defp not_a_host(host, callback),
    do: Error.invalid_argument(to_string_safe(callback), "#{inspect(host)} is not a host: open one with Callbox.open/2")

  # fun.(ref) for a host, turning the NIF's badarg for a ref that is not a
  # host resource into the documented {:error, %Callbox.Error{}}.
  defp on_host(%Host{ref: ref} = host, callback, fun) do
    fun.(ref)
  rescue
    e in ArgumentError -> if host_ref?(host.ref), do: reraise(e, __STACKTRACE__), else: {:error, not_a_host(host, callback)}
  end

  defp on_host(other, callback, _fun), do: {:error, not_a_host(other, callback)}

  # Whether the NIF takes ref as a host (an open or a closed one).
  defp host_ref?(ref) do
    Native.callbacks(ref)
    true
  rescue
    ArgumentError -> false
  end

  @doc false
  def native_inputs(callback, inputs) when is_list(inputs) do
    Enum.map(inputs, fn t ->
      try do
        native_input(t)
      rescue
        e in ArgumentError -> throw({:callbox_bad_input, Error.invalid_argument(callback, Exception.message(e))})
      end
    end)
  end

  defp native_input(%Tensor{data: data, type: type, shape: shape}), do: {data, Tensor.dtype_name!(type), shape}

  defp native_input({data, type, shape}) when is_binary(data) and is_tuple(shape),
    do: {data, Tensor.dtype_name!(type), shape}

  defp native_input(%{__struct__: Nx.Tensor} = t), do: native_input(Callbox.Nx.from_nx(t))

  defp native_input(other),
    do: raise(ArgumentError, "not a tensor: #{inspect(other)} (pass a Callbox.Tensor or {binary, type, shape})")

  defp output({data, name, shape}), do: %Tensor{data: data, type: Tensor.type_of(name), shape: shape}

  defp ok(:ok), do: :ok
  defp ok({:error, e}), do: {:error, Error.from_native(e)}

  @doc false
  def bang({:ok, v}), do: v
  def bang(:ok), do: :ok
  def bang({:error, e}), do: raise(e)
end
