# A 1 KiB call (f32[256] through kit.wasm's copy) through the NIF beside
# the same call through the C API, in the same VM, round by round:
#   capi    callbox_call in a C loop inside this VM (Callbox.Native.bench_capi/4,
#           on a dirty scheduler; what ffi/testdata/bench.c measures in its own process)
#   call    Callbox.call/3, the default: callbox_call_within on the caller's
#           normal scheduler within a 100 us slice (a wasmtime callback goes
#           to a library thread unless the normal schedulers' stacks hold it)
#   async   Callbox.call/4 with async: true (inline_us: 0 is the same; the
#           route of a call that outran its slice): callbox_request_async from a normal
#           scheduler, which polls 20 us for the call's end before leaving the
#           reply to a message
#   many    Callbox.call_many/3, 100 calls per dirty scheduler trip
#   handoff no call: two threads of the VM handing a number back and forth
#           as the async route's threads do (Callbox.Native.bench_handoff/1),
#           the floor of any route that runs the call on another thread
# Each round times 10,000 calls of every variant, interleaved in chunks of
# 2,000 (capi, call, async, ... then capi again), so that a burst of noise
# from the machine's neighbours lands on every variant of the round alike;
# the report is the median over the rounds of each variant's ns per call
# and of each round's ratio to capi (and the best round's, for reference).
# The machine is shared and noisy: only the ratios within a round mean much.
# Last, how long a runaway holds a normal scheduler: spin (kit.wasm's
# endless loop, 250 ms timeout) called at 20 input shapes, each first tried
# within the slice: the longest attempt given up (slice plus the engine's
# interrupt latency), beside the longest call that finished inline in the
# whole run (which includes the OS descheduling the thread).
#   mix run bench/call_bench.exs CONFIG [CALLBACK...]
[config | names] = System.argv()
names = if names == [], do: ["copy_f32", "copy_f32_wasmtime"], else: names
{:ok, host} = Callbox.open(config)
{:ok, callbacks} = Callbox.callbacks(host)
engine = Map.new(callbacks, &{&1.name, &1.engine})
x = Callbox.Tensor.from_list(Enum.map(0..255, &(&1 * 1.0)), {:f, 32})
native = [{x.data, :f32, {256}}]
n = 10_000
chunk = 2_000
rounds = String.to_integer(System.get_env("ROUNDS", "9"))
batch = List.duplicate([x], 100)

defmodule CallBench do
  # `count` calls of f, each result dropped as it comes (as the C loop
  # reuses its output buffer), not kept in a list; a compiled loop, not a
  # recursive closure, so what the loop itself costs stays small beside
  # the call, as in the C loop.
  def repeat(_f, 0), do: :ok

  def repeat(f, k) do
    f.()
    repeat(f, k - 1)
  end
end

# ns (total) of `count` calls of f.
time = fn f, count ->
  {t, _} = :timer.tc(fn -> CallBench.repeat(f, count) end)
  t * 1000
end

median = fn list ->
  s = Enum.sort(list)
  k = length(s)
  if rem(k, 2) == 1, do: Enum.at(s, div(k, 2)), else: (Enum.at(s, div(k, 2) - 1) + Enum.at(s, div(k, 2))) / 2
end

for name <- names do
  [^x] = Callbox.call!(host, name, [x])
  [^x] = Callbox.call!(host, name, [x], async: true)

  # Each runs one chunk of calls and returns their total ns.
  run = %{
    capi: fn ->
      {:ok, ns} = Callbox.Native.bench_capi(host.ref, name, native, chunk)
      ns * chunk
    end,
    call: fn -> time.(fn -> {:ok, [_]} = Callbox.call(host, name, [x]) end, chunk) end,
    async: fn -> time.(fn -> {:ok, [_]} = Callbox.call(host, name, [x], async: true) end, chunk) end,
    many: fn -> time.(fn -> {:ok, _} = Callbox.call_many(host, name, batch) end, div(chunk, 100)) end,
    handoff: fn -> Callbox.Native.bench_handoff(chunk) * chunk end
  }

  order = [:capi, :call, :async, :many, :handoff]
  for v <- order, do: run[v].()

  # A round: n calls of each variant in chunks, interleaved; ns per call.
  results =
    for _round <- 1..rounds do
      totals =
        for _chunk <- 1..div(n, chunk), v <- order, reduce: %{} do
          acc -> Map.update(acc, v, run[v].(), &(&1 + run[v].()))
        end

      Map.new(totals, fn {v, ns} -> {v, ns / n} end)
    end

  for v <- order do
    ns = Enum.map(results, & &1[v])
    ratios = Enum.map(results, &(&1[v] / &1.capi))

    IO.puts(
      "elixir #{name} #{engine[name]} 1KiB #{v} median_ns_per_call #{Float.round(median.(ns) / 1, 1)} " <>
        "min #{Float.round(Enum.min(ns), 1)} ratio_to_capi median #{Float.round(median.(ratios), 2)} " <>
        "best_round #{Float.round(Enum.min(ratios), 2)}"
    )
  end
end

if Enum.any?(callbacks, &(&1.name == "spin")) do
  for k <- 1..20 do
    {:error, %Callbox.Error{kind: :timeout}} = Callbox.call(host, "spin", [Callbox.Tensor.from_list(List.duplicate(0.0, k), {:f, 32})])
  end

  stats = Callbox.Native.call_stats()

  IO.puts(
    "elixir spin slice 100 us: #{stats.gave_up} attempts given up, the longest #{Float.round(stats.gave_up_max_ns / 1000, 1)} us; " <>
      "the longest call finished inline in the run #{Float.round(stats.inline_max_ns / 1000, 1)} us"
  )
end

# What the BEAM itself charges: a dirty CPU scheduler round trip that does
# nothing (erts_debug's dirty_cpu/2 BIF), the floor of any dirty NIF call.
if function_exported?(:erts_debug, :dirty_cpu, 2) do
  ns = for _round <- 1..rounds, do: time.(fn -> :erts_debug.dirty_cpu(:wait, 0) end, n)
  IO.puts("beam   empty dirty CPU scheduler round trip median ns #{Float.round(median.(ns) / n, 1)}")
end
