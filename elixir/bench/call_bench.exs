# A 1 KiB call (f32[256] through kit.wasm's copy) through the NIF, timed with
# :timer.tc over 10,000 calls per round, fastest of five rounds after a
# warm-up, per engine; compare with the C API on the same callback
# (ffi/testdata/bench.c, `make elixir-bench` runs both).
#   mix run bench/call_bench.exs CONFIG [CALLBACK...]
[config | names] = System.argv()
names = if names == [], do: ["copy_f32", "copy_f32_wasmtime"], else: names
{:ok, host} = Callbox.open(config)
x = Callbox.Tensor.from_list(Enum.map(0..255, &(&1 * 1.0)), {:f, 32})
n = 10_000

for name <- names do
  [^x] = Callbox.call!(host, name, [x])

  best =
    for _round <- 0..5 do
      {t, _} = :timer.tc(fn -> for _ <- 1..n, do: {:ok, [_]} = Callbox.call(host, name, [x]) end)
      t * 1000 / n
    end
    |> tl()
    |> Enum.min()

  IO.puts("elixir #{name} 1KiB ns_per_call #{Float.round(best, 1)}")
end

# The same calls 100 at a time with Callbox.call_many/4: one dirty
# scheduler trip per 100 calls.
batch = List.duplicate([x], 100)

for name <- names do
  best =
    for _round <- 0..5 do
      {t, _} = :timer.tc(fn -> for _ <- 1..div(n, 100), do: {:ok, _} = Callbox.call_many(host, name, batch) end)
      t * 1000 / n
    end
    |> tl()
    |> Enum.min()

  IO.puts("elixir #{name} 1KiB call_many(100) ns_per_call #{Float.round(best, 1)}")
end

# What the BEAM itself charges: a dirty CPU scheduler round trip that does
# nothing (erts_debug's dirty_cpu/2 BIF), the floor of any dirty NIF call.
if function_exported?(:erts_debug, :dirty_cpu, 2) do
  best =
    for _round <- 0..5 do
      {t, _} = :timer.tc(fn -> for _ <- 1..n, do: :erts_debug.dirty_cpu(:wait, 0) end)
      t * 1000 / n
    end
    |> tl()
    |> Enum.min()

  IO.puts("beam   empty dirty CPU scheduler round trip ns #{Float.round(best, 1)}")
end
