defmodule Callbox.ResultsTest do
  # Where a call's results live (c_src/results.c): up to 64 bytes
  # a heap binary, up to 4 KiB a slice of the calling thread's 32 KiB
  # arena, larger a binary of its own. Every kind must hold its own bytes
  # for as long as it is referenced, however many calls come after it, and
  # arenas must be freed once no result in them is.
  use Callbox.KitCase, async: false

  # u8 tensors of these sizes: both sides of each boundary.
  @sizes [0, 1, 64, 65, 1000, 4096, 4097, 40_000]

  defp u8(bytes), do: %Tensor{data: bytes, type: {:u, 8}, shape: {byte_size(bytes)}}

  test "results of every size hold their bytes while later calls fill new arenas", %{host: host} do
    inputs = for size <- @sizes, _ <- 1..40, do: u8(:rand.bytes(size))

    kept =
      for x <- inputs do
        assert {:ok, [y]} = Callbox.call(host, "copy_u8", [x])
        y
      end

    # Many more calls after them: the arenas those results live in are
    # long full and replaced (32 KiB of 1 KiB results is 32 calls).
    filler = u8(:binary.copy(<<7>>, 1000))
    for _ <- 1..2_000, do: {:ok, [_]} = Callbox.call(host, "copy_u8", [filler])
    :erlang.garbage_collect()

    for {x, y} <- Enum.zip(inputs, kept) do
      assert y.data == x.data
      assert y.shape == x.shape
    end
  end

  test "a result's bytes are its own: a later call's result in the same arena does not touch them", %{host: host} do
    a = u8(:binary.copy(<<1>>, 1000))
    b = u8(:binary.copy(<<2>>, 1000))
    {:ok, [ya]} = Callbox.call(host, "copy_u8", [a])
    {:ok, [yb]} = Callbox.call(host, "copy_u8", [b])
    assert ya.data == a.data
    assert yb.data == b.data
    # A failed call (input type mismatch refused, a trap) changes nothing.
    assert {:error, _} = Callbox.call(host, "copy_u8", [f32([1.0])])
    assert ya.data == a.data
  end

  test "arenas are freed when their results are garbage", %{host: host} do
    x = u8(:binary.copy(<<3>>, 1000))
    run = fn count -> for _ <- 1..count, do: {:ok, [_]} = Callbox.call(host, "copy_u8", [x]) end
    run.(5_000)
    :erlang.garbage_collect()
    before = Callbox.Native.call_stats().arenas_live
    # 200,000 KiB of results, dropped as they come: about 6,000 arenas.
    run.(200_000)
    :erlang.garbage_collect()
    # What may remain: the current arena of each scheduler thread. (A
    # resource's destructor may run a little after its last reference
    # goes: erl_nif promises no moment.)
    threads = :erlang.system_info(:schedulers) + :erlang.system_info(:dirty_cpu_schedulers)
    more = fn -> Callbox.Native.call_stats().arenas_live - before end
    Enum.find(1..200, fn _ -> more.() <= threads or (Process.sleep(10) && false) end)
    assert more.() <= threads, "#{more.()} more arenas alive after 200,000 dropped 1 KiB results"
  end
end
