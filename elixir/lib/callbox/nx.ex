defmodule Callbox.Nx do
  @moduledoc """
  Nx tensors in and out of callbox calls, and a callback inside `defn`.

  This module is always compiled: it calls Nx only at run time, so a
  project that depends on both callbox and nx has it after a plain `mix
  compile`, whichever of the two Mix compiles first. Calling it without
  Nx loaded raises an `ArgumentError` saying so.

  NOT EXERCISED WITH REAL NX HERE: Nx could not be installed where this
  binding is tested (no Hex access). A test runs this module against a
  stub Nx (the functions below, on a binary-backed struct): it checks
  this module's own logic and nothing about Nx. It uses `Nx.to_binary/1`,
  `Nx.from_binary/2`, `Nx.reshape/2`, `Nx.type/1`, `Nx.shape/1`, and for
  `defn`, `Nx.template/2` and `Nx.runtime_call/4` (Nx 0.12 and later) or
  `/3` (Nx 0.11).

  Nx has no boolean type (it uses `{:u, 8}`): pass `type: {:pred, 8}` to
  `from_nx/2` for a callback parameter of callbox type `pred`; `pred`
  results come back as `{:u, 8}` tensors.

  ## Inside `defn` (Nx 0.11 and later)

  `Nx.runtime_call` is Nx's bridge from a compiled computation back to
  Elixir code, and it needs an output template: `runtime_call/4` builds
  it from the callback's signature (`Callbox.output_types/3`) and runs
  the callback in its sandbox. Call it from a transform:

      defn step(x, opts \\\\ []) do
        y = x * 2
        scale(y, opts[:host])
      end

      deftransformp scale(y, host), do: Callbox.Nx.runtime_call(host, "scale", {y, Nx.tensor(2.5)})

  A failed call raises `Callbox.Error` inside the computation. Before Nx
  0.11, `defn` has only `hook/3` (a side effect that returns nothing into
  the computation): call `call/4` from the hook's function.
  """

  alias Callbox.{Error, Tensor}

  @compile {:no_warn_undefined, [Nx]}

  @doc """
  An `Nx.Tensor` as a `Callbox.Tensor` (one copy, `Nx.to_binary/1`).
  A vectorized tensor is refused (`Nx.devectorize/2` it first): callbox
  calls see a tensor's whole shape.
  """
  def from_nx(tensor, opts \\ []) do
    nx!()

    case Map.get(tensor, :vectorized_axes, []) do
      [] ->
        :ok

      axes ->
        raise ArgumentError,
              "a vectorized Nx tensor (vectorized axes #{inspect(axes)}, inner shape #{inspect(Nx.shape(tensor))}): " <>
                "callbox calls take whole tensors; Nx.devectorize/2 it first"
    end

    type = Keyword.get(opts, :type, Nx.type(tensor))
    %Tensor{data: Nx.to_binary(tensor), type: type, shape: Nx.shape(tensor)}
  end

  @doc "A `Callbox.Tensor` as an `Nx.Tensor` (the binary backend's `Nx.from_binary/2`)."
  def to_nx(%Tensor{data: data, type: type, shape: shape}) do
    nx!()
    data |> Nx.from_binary(nx_type(type)) |> Nx.reshape(shape)
  end

  @doc """
  `Callbox.call/4` on Nx tensors, returning Nx tensors. A tensor it cannot
  pass (a vectorized one, say) is `{:error, %Callbox.Error{}}`, as any bad
  input of `Callbox.call/4` is.
  """
  def call(host, callback, tensors, opts \\ []) do
    # Callbox.call/4 takes Nx tensors itself (from_nx/1), and turns what
    # it cannot take into an error.
    case Callbox.call(host, callback, tensors, opts) do
      {:ok, outs} -> {:ok, Enum.map(outs, &to_nx/1)}
      error -> error
    end
  end

  @doc "`call/4`, returning the results or raising `Callbox.Error`."
  def call!(host, callback, tensors, opts \\ []), do: Callbox.bang(call(host, callback, tensors, opts))

  @doc """
  The output template of calling `callback` on these tensors (Nx tensors
  or templates, or anything with `Nx.type/1` and `Nx.shape/1`, such as a
  `defn` expression), as `Nx.runtime_call` wants it: one `Nx.template/2`
  for a callback with one result, a tuple of them otherwise. The types
  are the library's to derive (`Callbox.output_types/3`).
  """
  def template(host, callback, tensors) when is_list(tensors) do
    nx!()

    with {:ok, types} <- Callbox.output_types(host, callback, Enum.map(tensors, &{Nx.type(&1), Nx.shape(&1)})) do
      case Enum.map(types, fn {type, shape} -> Nx.template(shape, nx_type(type)) end) do
        [one] -> {:ok, one}
        many -> {:ok, List.to_tuple(many)}
      end
    end
  end

  @doc "`template/3`, raising `Callbox.Error`."
  def template!(host, callback, tensors), do: Callbox.bang(template(host, callback, tensors))

  @doc """
  Calls `callback` from inside `defn` (from a transform: see the module
  doc) on `inputs`, a tensor or a tuple of tensors, through
  `Nx.runtime_call` with the template `template/3` derives. Returns the
  result (a tuple for several). A failed call raises `Callbox.Error` when
  the computation runs; bad arguments raise it here, while tracing.
  """
  def runtime_call(%Callbox.Host{} = host, callback, inputs) do
    tensors = if is_tuple(inputs), do: Tuple.to_list(inputs), else: [inputs]
    out = template!(host, callback, tensors)
    opts = [host: host, callback: callback]

    if function_exported?(Nx, :runtime_call, 4) do
      apply(Nx, :runtime_call, [out, inputs, opts, &__MODULE__.run_runtime_call/2])
    else
      # Nx 0.11: the function takes the tensors only.
      apply(Nx, :runtime_call, [out, inputs, fn c -> run_runtime_call(c, opts) end])
    end
  end

  def runtime_call(host, callback, _inputs) do
    raise Error.invalid_argument(to_string(callback), "runtime_call: #{inspect(host)} is not a host (give a Callbox.Host)")
  end

  @doc false
  # Nx.runtime_call's function: the tensors as Nx passes them (one, or a
  # tuple), the results as the template has them.
  def run_runtime_call(inputs, opts) do
    tensors = if is_tuple(inputs), do: Tuple.to_list(inputs), else: [inputs]

    case call!(Keyword.fetch!(opts, :host), Keyword.fetch!(opts, :callback), tensors) do
      [one] -> one
      many -> List.to_tuple(many)
    end
  end

  defp nx_type({:pred, 8}), do: {:u, 8}
  defp nx_type(type), do: type

  defp nx! do
    unless Code.ensure_loaded?(Nx) do
      raise ArgumentError, "Callbox.Nx needs Nx, which is not loaded: add {:nx, ...} to your project's deps"
    end
  end
end
