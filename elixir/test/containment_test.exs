defmodule Callbox.ContainmentTest do
  # The BEAM side of containment: many processes calling at once, a caller
  # killed in the middle of a long call, and hosts dropped without close.
  # Not async: these measure the VM (dirty schedulers, memory) alone.
  use ExUnit.Case, async: false

  import Bitwise
  alias Callbox.{Error, Tensor, TestGuests}

  setup_all do
    {:ok, host} = Callbox.open(TestGuests.config_path())
    {:ok, hostile} = Callbox.open(TestGuests.hostile_config_path())
    %{host: host, hostile: hostile}
  end

  defp f32(list), do: Tensor.from_list(list, {:f, 32})

  test "calls from many processes at once, healthy and hostile, on both engines", %{host: host, hostile: hostile} do
    tasks =
      for p <- 1..48 do
        Task.async(fn ->
          for i <- 1..25 do
            case rem(p, 8) do
              0 ->
                engine = Enum.at(TestGuests.engines(), rem(i, 2))
                cb = TestGuests.hostile_name("div_by_zero", engine)
                assert {:error, %Error{kind: :divide_by_zero, callback: ^cb}} = Callbox.call(hostile, cb, [f32([0.0])])

              1 ->
                assert {:error, %Error{kind: :guest_error, guest_message: "bad input"}} =
                         Callbox.call(host, "fail", [f32([1.0])])

              _ ->
                x = f32(for k <- 1..(p + i), do: p * 1000.0 + i + k)
                assert {:ok, [^x]} = Callbox.call(host, "copy_f32", [x])
            end
          end

          :done
        end)
      end

    # and two runaways, one per engine, stopped by their timeouts meanwhile
    spins =
      for engine <- TestGuests.engines() do
        Task.async(fn -> Callbox.call(hostile, TestGuests.hostile_name("spin", engine), [f32([1.0])]) end)
      end

    assert Enum.map(tasks, &Task.await(&1, 60_000)) == List.duplicate(:done, 48)
    for s <- spins, do: assert({:error, %Error{kind: :timeout}} = Task.await(s, 10_000))
  end

  test "a caller killed in the middle of a long call: its guest is canceled, the host keeps serving", %{host: host} do
    for cb <- ["spin_long", "spin_wasmtime"] do
      parent = self()
      {_, _, _, fired0} = Callbox.Native.closer_stats()

      pid =
        spawn(fn ->
          send(parent, :calling)
          Callbox.call(host, cb, [f32([1.0])])
          send(parent, :returned)
        end)

      assert_receive :calling
      # the call is running on a library thread (after its slice)
      Callbox.TestWait.wait_threaded(1)
      ref = Process.monitor(pid)
      Process.exit(pid, :kill)
      assert_receive {:DOWN, ^ref, :process, ^pid, :killed}, 5_000
      refute_received :returned

      # The NIF's monitor on the caller fired the call's cancel token: the
      # killed call ends within milliseconds instead of running out its
      # 1.5 s timeout on a dirty scheduler. Two runaways at once need both
      # dirty schedulers (the VM has as many as cores: two here), so both
      # stopping at their own 250 ms means the killed call is gone.
      tasks = for _ <- 1..2, do: Task.async(fn -> :timer.tc(fn -> Callbox.call(host, "spin", [f32([1.0])]) end) end)

      for {t, res} <- Enum.map(tasks, &Task.await(&1, 10_000)) do
        assert {:error, %Error{kind: :timeout, callback: "spin"}} = res
        assert t < 1_250_000, "a call after the kill took #{div(t, 1000)} ms"
      end

      {_, _, _, fired1} = Callbox.Native.closer_stats()
      assert fired1 == fired0 + 1
      assert {:ok, [%{data: <<7.0::float-32-native>>}]} = Callbox.call(host, "copy_f32", [f32([7.0])])
      # and the callback the killed caller ran serves again (with a token of
      # the caller's own, which the guard leaves alone)
      assert {:error, %Error{kind: :timeout, callback: ^cb}} =
               Callbox.call(host, cb, [f32([1.0])], cancel: Callbox.cancel_token())
    end
  end

  @tag timeout: 300_000
  test "hosts dropped without close are closed when collected; memory stays bounded" do
    dir = TestGuests.dir()
    cfg = %{callbacks: %{c: %{module: "kit.wasm", export: "copy", signature: "(x: f32[n]) -> f32[n]"}}}
    x = f32([1.0, 2.0])

    {_, closed0, _, _} = Callbox.Native.closer_stats()

    # A round's hosts are closed once the collector has run their
    # destructors (which the VM may run after garbage_collect/0 returns)
    # and the closer thread has closed them: wait for both.
    round = fn n, total ->
      for _ <- 1..n do
        {:ok, h} = Callbox.open(cfg, base_dir: dir)
        [^x] = Callbox.call!(h, "c", [x])
      end

      :erlang.garbage_collect()
      wait_closed(closed0 + total, 100)
      {rss_kb(), :erlang.memory(:total)}
    end

    {rss0, beam0} = round.(300, 300)
    samples = for k <- 1..4, do: round.(500, 300 + 500 * k)
    {rss1, beam1} = List.last(samples)
    {pending, closed1, _, _} = Callbox.Native.closer_stats()

    IO.puts(
      "\nrelease: 2300 hosts opened, called and dropped; RSS #{div(rss0, 1024)} MiB after 300, " <>
        "#{Enum.map_join(samples, " ", fn {r, _} -> "#{div(r, 1024)}" end)} MiB after each further 500; " <>
        "BEAM memory #{div(beam0, 1 <<< 20)} -> #{div(beam1, 1 <<< 20)} MiB"
    )

    assert pending == 0
    assert closed1 - closed0 >= 2300
    assert rss1 - rss0 < 64 * 1024, "RSS grew #{div(rss1 - rss0, 1024)} MiB over 2000 hosts"
    assert beam1 - beam0 < 16 <<< 20
  end

  defp wait_closed(_closed, 0), do: flunk("dropped hosts were not closed")

  defp wait_closed(closed, tries) do
    case Callbox.Native.closer_stats() do
      {0, done, _, _} when done >= closed ->
        :ok

      _ ->
        :erlang.garbage_collect()
        Process.sleep(100)
        wait_closed(closed, tries - 1)
    end
  end

  defp rss_kb do
    [_, kb] = Regex.run(~r/VmRSS:\s+(\d+) kB/, File.read!("/proc/self/status"))
    String.to_integer(kb)
  end
end
