defmodule Callbox.ProcessTest do
  # isolation: process through the Elixir door: the callback runs in a
  # callbox-worker process (build/callbox-worker beside the library); a
  # worker killed mid-call fails that call as :worker_died, and the next
  # call runs on a new worker.
  use ExUnit.Case, async: false

  alias Callbox.{Error, Tensor, TestGuests}

  defp f32(list), do: Tensor.from_list(list, {:f, 32})

  defp config(name, export, extra) do
    """
    worker: #{Path.join(TestGuests.root(), "build/callbox-worker")}
    callbacks:
      #{name}:
        module: #{TestGuests.dir()}/kit.wasm
        export: #{export}
        signature: "(x: f32[n]) -> f32[n]"
        isolation: process
    #{extra}
    """
  end

  # The pids of this OS process's callbox-worker children.
  defp workers do
    me = System.pid()

    for entry <- File.ls!("/proc"), Integer.parse(entry) != :error, reduce: [] do
      acc ->
        case File.read("/proc/#{entry}/stat") do
          {:ok, stat} ->
            [comm_and_rest | _] = String.split(stat, "(", parts: 2) |> tl()
            [comm, rest] = String.split(comm_and_rest, ")", parts: 2)
            ppid = rest |> String.split() |> Enum.at(1)
            if ppid == me and String.starts_with?(comm, "callbox-worke"), do: [String.to_integer(entry) | acc], else: acc

          _ ->
            acc
        end
    end
  end

  defp cpu_ticks(pid) do
    stat = File.read!("/proc/#{pid}/stat")
    [_, rest] = String.split(stat, ")", parts: 2)
    rest |> String.split() |> Enum.at(11) |> String.to_integer()
  end

  defp wait_until(f, deadline) do
    cond do
      f.() -> :ok
      System.monotonic_time(:millisecond) > deadline -> flunk("the guest never started spinning")
      true -> wait_until(f, deadline)
    end
  end

  test "a call in a worker, and a worker killed mid-call is :worker_died" do
    {:ok, copy} = Callbox.open_config(config("copy_walled", "copy", ""), "yaml")
    on_exit(fn -> Callbox.close(copy) end)
    before = MapSet.new(workers())
    {:ok, spin} = Callbox.open_config(config("spin_walled", "spin", "    timeout: 20s"), "yaml")
    on_exit(fn -> Callbox.close(spin) end)
    [spin_pid] = MapSet.to_list(MapSet.difference(MapSet.new(workers()), before))

    x = f32([1.0, 2.0, 3.0])
    assert {:ok, [y]} = Callbox.call(copy, "copy_walled", [x])
    assert Tensor.to_list(y) == [1.0, 2.0, 3.0]

    start = cpu_ticks(spin_pid)
    task = Task.async(fn -> Callbox.call(spin, "spin_walled", [f32([0.0])]) end)
    wait_until(fn -> cpu_ticks(spin_pid) >= start + 5 end, System.monotonic_time(:millisecond) + 15_000)
    {_, 0} = System.cmd("kill", ["-9", Integer.to_string(spin_pid)])
    assert {:error, %Error{kind: :worker_died, callback: "spin_walled"} = e} = Task.await(task, 30_000)
    # The signal, where the VM leaves the exit status to the library; the
    # Erlang VM ignores SIGCHLD, so the kernel keeps no status to read.
    assert e.message =~ ~r/killed by signal SIGKILL|its exit status is unknown/

    assert {:ok, [y]} = Callbox.call(copy, "copy_walled", [x])
    assert Tensor.to_list(y) == [1.0, 2.0, 3.0]
  end
end
