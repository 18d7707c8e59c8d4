defmodule Callbox.Chain do
  @moduledoc """
  An ordered chain: its calls and taps run strictly in the order they are
  made (from any process). The first failure fails the chain: every later
  call and tap on it does not run and returns (or reports at the barrier)
  an error whose `:failed` names the step that failed, until `reset/1`.

      chain = Callbox.chain(host, "log")
      :ok = Callbox.Chain.tap(chain, "tap_print", [x])
      {:ok, [y]} = Callbox.Chain.call(chain, "scale", [x, factor])
      :ok = Callbox.Chain.barrier(chain)
  """

  defstruct [:host, :name]
  @type t :: %__MODULE__{host: Callbox.Host.t(), name: String.t()}

  @doc "Calls a callback as the chain's next step, waiting for it (options as `Callbox.call/4`)."
  def call(%__MODULE__{host: %{ref: ref}, name: name}, callback, inputs, opts \\ []),
    do: Callbox.do_call(ref, name, callback, inputs, opts)

  @doc "`call/4`, raising `Callbox.Error`."
  def call!(chain, callback, inputs, opts \\ []), do: Callbox.bang(call(chain, callback, inputs, opts))

  @doc "Queues a side-effect call as the chain's next step and returns at once (inputs copied first)."
  def tap(%__MODULE__{host: %{ref: ref}, name: name}, callback, inputs), do: Callbox.do_tap(ref, name, callback, inputs)

  @doc "Waits for every step queued on the chain and returns its first failure."
  def barrier(%__MODULE__{host: %{ref: ref}, name: name}), do: result(Callbox.Native.barrier(ref, name))

  @doc """
  Waits for the chain's queued steps, then clears its failure: later calls
  and taps run again (sequence numbers continue).
  """
  def reset(%__MODULE__{host: %{ref: ref}, name: name}), do: result(Callbox.Native.chain_reset(ref, name))

  defp result(:ok), do: :ok
  defp result({:error, e}), do: {:error, Callbox.Error.from_native(e)}
end
