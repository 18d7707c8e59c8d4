defmodule Callbox.InlineTest do
  # The default route of Callbox.call/4: a call starts on the caller's
  # normal scheduler within a slice (inline_us) through callbox_call_within,
  # and moves to a library thread (callbox_request_async), from the start,
  # only when it outruns it. Callbox.Native.call_stats/0 counts the routes calls took; this
  # module runs alone (async: false), so the counts are this test's.
  use Callbox.KitCase, async: false

  # The change in call_stats/0 over f's run, and f's result.
  defp routes(f) do
    before = Callbox.Native.call_stats()
    result = f.()
    later = Callbox.Native.call_stats()
    {Map.new([:inline, :gave_up, :threaded], &{&1, later[&1] - before[&1]}), result}
  end

  test "a short call finishes on the caller's scheduler, with the threaded route's result", %{host: host} do
    x = f32([1.0, -2.5, 3.0])
    # A slice of a whole second: the call finishes inline however loaded
    # the machine (the default 100 us slice could be outrun by a
    # descheduled thread; that route is the next test's).
    {counts, inline} = routes(fn -> Callbox.call(host, "copy_f32", [x], inline_us: 1_000_000) end)
    assert counts == %{inline: 1, gave_up: 0, threaded: 0}
    assert {:ok, [^x]} = inline
    {counts, threaded} = routes(fn -> Callbox.call(host, "copy_f32", [x], inline_us: 0) end)
    assert counts == %{inline: 0, gave_up: 0, threaded: 1}
    assert threaded == inline
    # Tensors given as {binary, type, shape} take the same route.
    {counts, tuple} =
      routes(fn -> Callbox.call(host, "copy_f32", [{x.data, {:f, 32}, {3}}], inline_us: 1_000_000) end)
    assert counts.inline == 1
    assert tuple == inline
  end

  test "a call that outruns its slice runs again from the start on a library thread", %{host: host} do
    # 4 MiB copied in and out: far more than a 1 us slice.
    x = f32(Enum.map(1..1_048_576, &(&1 * 0.5)))
    {counts, result} = routes(fn -> Callbox.call(host, "copy_f32", [x], inline_us: 1) end)
    assert counts == %{inline: 0, gave_up: 1, threaded: 1}
    assert {:ok, [^x]} = result
    # For a while, that callback at those types goes straight to a library
    # thread: no slice spent on it.
    {counts, result} = routes(fn -> Callbox.call(host, "copy_f32", [x], inline_us: 1) end)
    assert counts == %{inline: 0, gave_up: 0, threaded: 1}
    assert {:ok, [^x]} = result
  end

  test "a runaway is stopped at the end of its slice and then at its own timeout", %{host: host} do
    x = f32([1.0, 2.0])
    {counts, result} = routes(fn -> Callbox.call(host, "spin", [x]) end)
    assert counts == %{inline: 0, gave_up: 1, threaded: 1}
    assert {:error, %Error{kind: :timeout, callback: "spin", message: message}} = result
    assert message =~ "timeout after 250ms", "the callback's own timeout, not the slice: #{message}"
    {counts, _} = routes(fn -> Callbox.call(host, "spin", [x]) end)
    assert counts == %{inline: 0, gave_up: 0, threaded: 1}
    # Other input shapes are tried on the caller's scheduler again.
    {counts, _} = routes(fn -> Callbox.call(host, "spin", [f32([1.0, 2.0, 3.0])]) end)
    assert counts.gave_up == 1
    # The slice stopped the attempts well before the 250 ms timeout.
    assert Callbox.Native.call_stats().gave_up_max_ns < 200_000_000
    # The slice clock reads an attempt given up as at least its slice
    # (100 us) and far below the timeout, on the TSC too once its rate is
    # measured (10 ms after the NIF loaded; x86-64 with an invariant TSC).
    Process.sleep(20)
    {_, _} = routes(fn -> Callbox.call(host, "copy_f32", [x]) end)
    {counts, _} = routes(fn -> Callbox.call(host, "spin", [f32([1.0, 2.0, 3.0, 4.0])]) end)
    assert counts.gave_up == 1
    stats = Callbox.Native.call_stats()
    assert stats.gave_up_last_ns >= 100_000 and stats.gave_up_last_ns < 200_000_000, inspect(stats)
    assert stats.slice_clock in [:tsc, :monotonic]
    # The host serves the callback's neighbours as before.
    assert {:ok, [^x]} = Callbox.call(host, "copy_f32", [x])
  end

  test "chain calls always run on a library thread", %{host: host} do
    chain = Callbox.chain(host, "inline_test")
    x = f32([4.0])
    {counts, result} = routes(fn -> Callbox.Chain.call(chain, "copy_f32", [x]) end)
    assert counts == %{inline: 0, gave_up: 0, threaded: 1}
    assert {:ok, [^x]} = result
  end

  test "wasmtime guests run on the caller's scheduler too, on a big stack of the thread's own", %{host: host} do
    x = f32([7.0, 8.0])
    # Warm the pool: a first call instantiates the module within its slice
    # and may outrun it (then the next two calls go to a library thread).
    for _ <- 1..4, do: assert({:ok, [^x]} = Callbox.call(host, "copy_wasmtime", [x]))
    {counts, result} = routes(fn -> Callbox.call(host, "copy_wasmtime", [x]) end)
    assert {:ok, [^x]} = result

    {:ok, %Callbox.Callback{limits: %{caller_stack: caller_stack}}} = Callbox.callback(host, "copy_wasmtime")

    if caller_stack == 0 do
      assert counts == %{inline: 1, gave_up: 0, threaded: 0}
    else
      assert counts.inline + counts.threaded == 1
    end
  end

  test "one slow call sends only the next two to a library thread", %{host: host} do
    # 4 MiB copied in and out (a shape no other test uses): a 1 us slice
    # is outrun, a 1 s one is not.
    x = f32(Enum.map(1..1_048_573, &(&1 * 0.25)))
    {counts, _} = routes(fn -> Callbox.call(host, "copy_f32", [x], inline_us: 1) end)
    assert counts.gave_up == 1
    {counts, _} = routes(fn -> for _ <- 1..2, do: Callbox.call(host, "copy_f32", [x], inline_us: 1_000_000) end)
    assert counts == %{inline: 0, gave_up: 0, threaded: 2}
    {counts, result} = routes(fn -> Callbox.call(host, "copy_f32", [x], inline_us: 1_000_000) end)
    assert counts == %{inline: 1, gave_up: 0, threaded: 0}
    assert {:ok, [^x]} = result
  end

  test "a bad inline_us or timeout is refused as an error, naming it", %{host: host} do
    x = f32([1.0])

    for {opt, value} <- [inline_us: -1, inline_us: :fast, timeout: 0, timeout: 1.5, timeout: "1s"] do
      assert {:error, %Error{kind: :invalid_argument, callback: "copy_f32", message: m}} =
               Callbox.call(host, "copy_f32", [x], [{opt, value}])

      assert m =~ "#{opt}: #{inspect(value)}"
    end

    # the library judges the value: past its bound (an hour) is its refusal
    assert {:error, %Error{kind: :invalid_argument, message: m}} =
             Callbox.call(host, "copy_f32", [x], timeout: 3_600_001)

    assert m =~ "budget"
    assert {:ok, [^x]} = Callbox.call(host, "copy_f32", [x], timeout: 1000)
    assert {:ok, [^x]} = Callbox.call(host, "copy_f32", [x], timeout: :infinity)
  end

  test "a struct with a type callbox lacks is refused naming the input", %{host: host} do
    bad = %Tensor{data: <<0::32>>, type: {:f, 7}, shape: {1}}
    assert {:error, %Error{kind: :invalid_argument, message: message}} = Callbox.call(host, "copy_f32", [bad])
    assert message =~ "input 0"
    assert {:error, %Error{kind: :invalid_argument, message: message}} = Callbox.call(host, "copy_f32", [f32([1.0]), bad])
    assert message =~ "input 1"
  end
end
