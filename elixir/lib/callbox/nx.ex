if Code.ensure_loaded?(Nx) do
  defmodule Callbox.Nx do
    @moduledoc """
    Nx tensors in and out of callbox calls (compiled only where Nx is
    loaded when callbox is compiled).

    NOT EXERCISED WITH REAL NX: Nx could not be installed where this
    binding was written and tested (no Hex access). A test compiles this
    module against a stub Nx and runs it. It uses only `Nx.to_binary/1`,
    `Nx.from_binary/2`, `Nx.reshape/2`, `Nx.type/1` and `Nx.shape/1`.

    Nx has no boolean type (it uses `{:u, 8}`): pass `type: {:pred, 8}` to
    `from_nx/2` for a callback parameter of callbox type `pred`; `pred`
    results come back as `{:u, 8}` tensors.
    """

    @doc "An `Nx.Tensor` as a `Callbox.Tensor` (one copy, `Nx.to_binary/1`)."
    def from_nx(tensor, opts \\ []) do
      type = Keyword.get(opts, :type, Nx.type(tensor))
      %Callbox.Tensor{data: Nx.to_binary(tensor), type: type, shape: Nx.shape(tensor)}
    end

    @doc "A `Callbox.Tensor` as an `Nx.Tensor` (the binary backend's `Nx.from_binary/2`)."
    def to_nx(%Callbox.Tensor{data: data, type: type, shape: shape}) do
      type = if type == {:pred, 8}, do: {:u, 8}, else: type
      data |> Nx.from_binary(type) |> Nx.reshape(shape)
    end

    @doc "`Callbox.call/4` on Nx tensors, returning Nx tensors."
    def call(host, callback, tensors, opts \\ []) do
      case Callbox.call(host, callback, Enum.map(tensors, &from_nx/1), opts) do
        {:ok, outs} -> {:ok, Enum.map(outs, &to_nx/1)}
        error -> error
      end
    end

    @doc "`call/4`, returning the results or raising `Callbox.Error`."
    def call!(host, callback, tensors, opts \\ []), do: Callbox.bang(call(host, callback, tensors, opts))
  end
end
