# The test guests: ffi/testdata/kit.wat and the hostile modules of the Go
# suite (host/testdata/hostile), compiled with wat2wasm (Debian's wabt) as
# python/tests/conftest.py does, into _build/testguests, and a config naming
# them.
# (CALLBOX_LOG_LEVEL=error, set by `make elixir-test`, quiets the guests' log lines: libcallbox reads
# the C environment, which System.put_env/2 does not reach.)

defmodule Callbox.TestGuests do
  @root Path.expand("../..", __DIR__)
  @dir Path.expand("../_build/testguests", __DIR__)

  def root, do: @root
  def dir, do: @dir

  @dtypes ~w(pred s8 s16 s32 s64 u8 u16 u32 u64 f16 f32 f64 c64 bf16 c128)
  def dtypes, do: @dtypes

  # The hostile cases this suite runs: the call-time cases of the Go
  # suite's modules runaway, traps, frame, imports and fuel (internal/hostile),
  # with the configuration internal/hostile gives them. The kinds expected
  # on each engine are read from docs/SECURITY.md's generated table, which
  # `go test ./host` checks against Go's own run.
  @modules ~w(runaway traps frame imports fuel)
  def hostile_modules, do: @modules

  @hostile [
    {"spin", "runaway", ""},
    {"recurse", "runaway", ""},
    {"deep_then_spin", "runaway", ""},
    {"grow_pages", "runaway", ""},
    {"grow_huge", "runaway", ""},
    {"grow_then_exhausted", "runaway", ""},
    {"table_grow", "runaway", ""},
    {"log_forever", "runaway", ""},
    {"fill_flood", "fuel", :fuel},
    {"copy_flood", "fuel", :fuel},
    {"table_flood", "fuel", :fuel},
    {"grow_flood", "fuel", :fuel},
    {"error_flood", "fuel", :fuel},
    {"random_flood", "fuel", :fuel},
    {"div_by_zero", "traps", ""},
    {"rem_by_zero", "traps", ""},
    {"int_overflow", "traps", ""},
    {"unreachable", "traps", ""},
    {"trunc_nan", "traps", ""},
    {"trunc_range", "traps", ""},
    {"indirect_mismatch", "traps", ""},
    {"indirect_null", "traps", ""},
    {"indirect_oob", "traps", ""},
    {"load_oob", "traps", ""},
    {"store_oob", "traps", ""},
    {"fill_oob", "traps", ""},
    {"overrun_1", "frame", ""},
    {"overrun_last_guard", "frame", ""},
    {"overrun_far", "frame", ""},
    {"redirect", "frame", ""},
    {"redirect_host", "frame", ""},
    {"rank_huge", "frame", ""},
    {"dim_negative", "frame", ""},
    {"byte_len_huge", "frame", ""},
    {"outputs_more", "frame", ""},
    {"magic", "frame", ""},
    {"descriptors_moved", "frame", ""},
    {"write_then_trap", "frame", ""},
    {"write_then_bad_status", "frame", ""},
    {"status_negative", "frame", ""},
    {"status_cancelled", "frame", ""},
    {"scribble_inputs", "frame", ""},
    {"error_ptr_oob", "imports", ""},
    {"error_len_huge", "imports", ""},
    {"error_len_wraps", "imports", ""},
    {"error_ptr_past_end", "imports", ""},
    {"error_megabytes", "imports", ""},
    {"error_invalid_utf8", "imports", ""},
    {"error_then_ok", "imports", ""},
    {"error_then_trap", "imports", ""},
    {"log_ptr_oob", "imports", ""},
    {"log_len_huge", "imports", ""},
    {"log_bad_levels", "imports", ""}
  ]
  def hostile, do: @hostile
  def engines, do: ~w(wazero wasmtime)

  def hostile_name(case_name, engine), do: "h_#{case_name}_#{engine}"

  def build! do
    File.mkdir_p!(@dir)
    wat2wasm = System.find_executable("wat2wasm") || raise "wat2wasm (Debian: wabt) is not installed"

    sources =
      [{Path.join(@root, "ffi/testdata/kit.wat"), "kit.wasm"}] ++
        for m <- @modules, do: {Path.join(@root, "host/testdata/hostile/#{m}.wat"), "#{m}.wasm"}

    for {src, out} <- sources do
      {_, 0} = System.cmd(wat2wasm, [src, "-o", Path.join(@dir, out)], stderr_to_stdout: true)
    end

    File.write!(config_path(), config())
    File.write!(hostile_config_path(), hostile_config())
  end

  def config_path, do: Path.join(@dir, "callbox.yaml")
  def hostile_config_path, do: Path.join(@dir, "hostile.yaml")

  defp entry(name, module, export, sig, extra \\ "") do
    "  #{name}:\n    module: #{module}\n    export: #{export}\n    signature: \"#{sig}\"\n    timeout: 250ms\n#{extra}"
  end

  defp config do
    IO.iodata_to_binary([
      "callbacks:\n",
      for(d <- @dtypes, do: entry("copy_#{d}", "kit.wasm", "copy", "(x: #{d}[n]) -> #{d}[n]")),
      entry("copy_scalar", "kit.wasm", "copy", "(x: f64[]) -> f64[]"),
      entry("copy_mat", "kit.wasm", "copy", "(x: f32[a,b]) -> f32[a,b]"),
      entry("with_eps", "kit.wasm", "copy2", "(x: f32[n], eps: f32[]) -> (f32[n], f32[])"),
      entry("copy2", "kit.wasm", "copy2", "(x: s16[n], y: f32[m]) -> (s16[n], f32[m])"),
      entry("fail", "kit.wasm", "fail", "(x: f32[n]) -> f32[n]"),
      # ten inputs (more than the NIF keeps on its stack); copy writes input 0
      # over input 1's place in the frame, so the result's values are not checked
      entry("ten", "kit.wasm", "copy", "(#{Enum.map_join(1..10, ", ", &"x#{&1}: f32[n]")}) -> f32[n]"),
      entry("bump", "kit.wasm", "bump", "(x: f32[n]) -> s32[]", "    max_instances: 1\n"),
      entry("say", "kit.wasm", "say", "(x: f32[n]) -> f32[n]"),
      entry("copy_wasmtime", "kit.wasm", "copy", "(w: f32[m]) -> f32[m]", "    engine: wasmtime\n"),
      entry("spin", "kit.wasm", "spin", "(x: f32[n]) -> f32[n]"),
      entry("spin_long", "kit.wasm", "spin", "(x: f32[n]) -> f32[n]") |> String.replace("250ms", "1500ms"),
      entry("spin_wasmtime", "kit.wasm", "spin", "(x: f32[n]) -> f32[n]", "    engine: wasmtime\n")
      |> String.replace("250ms", "1500ms")
    ])
  end

  # internal/hostile's Case.Callback: one pooled instance, 250ms, 1 MiB
  # (8 MiB for the imports module), fuel cases: WASI minimal, 16 MiB, fuel 100,000.
  defp hostile_config do
    IO.iodata_to_binary([
      "callbacks:\n",
      for {name, module, tweak} <- @hostile, engine <- engines() do
        mem = if module == "imports", do: "8MiB", else: "1MiB"

        extra =
          case tweak do
            :fuel ->
              "    engine: #{engine}\n    max_instances: 1\n    wasi: minimal\n    max_memory: 16MiB\n    fuel: 100000\n"

            "" ->
              "    engine: #{engine}\n    max_instances: 1\n    max_memory: #{mem}\n"
          end

        entry(hostile_name(name, engine), "#{module}.wasm", name, "(x: f32[n]) -> f32[n]", extra)
      end
    ])
  end

  @doc "Go's results per case from docs/SECURITY.md: %{case => %{\"wazero\" => kind_name, \"wasmtime\" => kind_name}}."
  def go_results do
    doc = File.read!(Path.join(@root, "docs/SECURITY.md"))
    [_, table] = String.split(doc, "<!-- BEGIN GENERATED: hostile cases -->", parts: 2)

    for line <- String.split(table, "\n"),
        [_, name, _what, _expected, wazero, wasmtime | _] <- [String.split(line, "|") |> Enum.map(&String.trim/1)],
        String.starts_with?(name, "`"),
        into: %{} do
      strip = fn s -> s |> String.replace(~r/\s*\[\^.*\]$/, "") |> String.trim() end
      {String.trim(name, "`"), %{"wazero" => strip.(wazero), "wasmtime" => strip.(wasmtime)}}
    end
  end
end

defmodule Callbox.TestWait do
  @moduledoc """
  Waiting in tests for what another process does, by its effect, never
  by a sleep's length: a condition polled until it holds, with a deadline
  that fails the test saying what it waited for.
  """
  import ExUnit.Assertions, only: [flunk: 1]

  @doc "Waits (up to 10 s, then fails naming `what`) until `ready.()` is true."
  def wait_until(what, ready, tries \\ 1000) do
    cond do
      ready.() -> :ok
      tries == 0 -> flunk("waited 10 s for #{what}")
      true -> Process.sleep(10) && wait_until(what, ready, tries - 1)
    end
  end

  @doc "Calls on library threads now (handed over and not yet over)."
  def threaded_in_flight do
    {started, finished, _} = Callbox.Native.async_stats()
    started - finished
  end

  @doc "Waits until at least `n` calls are running on library threads."
  def wait_threaded(n), do: wait_until("#{n} call(s) in flight on library threads", fn -> threaded_in_flight() >= n end)
end

defmodule Callbox.KitCase do
  @moduledoc """
  A test module over the kit guests' host (`Callbox.TestGuests.config_path/0`),
  opened once per module and passed as `:host`, with `f32/1` imported.
  """
  use ExUnit.CaseTemplate

  using do
    quote do
      alias Callbox.{Error, Tensor, TestGuests}
      import Callbox.KitCase, only: [f32: 1]
      import Callbox.TestWait
    end
  end

  setup_all do
    {:ok, host} = Callbox.open(Callbox.TestGuests.config_path())
    %{host: host}
  end

  @doc "An f32 tensor of the numbers in list."
  def f32(list), do: Callbox.Tensor.from_list(list, {:f, 32})
end

Callbox.TestGuests.build!()
ExUnit.start()
