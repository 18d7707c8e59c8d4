defmodule Callbox.NxStubTest do
  # Callbox.Nx is compiled only where Nx is loaded, and Nx cannot be
  # installed here (no Hex). This test compiles lib/callbox/nx.ex against a
  # stub Nx (below: the five functions Callbox.Nx uses, on a binary-backed
  # struct) and runs it, so the module's own logic runs; it says nothing
  # about real Nx.
  use ExUnit.Case, async: false

  alias Callbox.TestGuests

  defmodule Stub do
    # What the stub stands for: Nx.Tensor with the binary backend.
    def define do
      Code.compile_string("""
      defmodule Nx.Tensor do
        defstruct [:data, :type, :shape]
      end

      defmodule Nx do
        def to_binary(%Nx.Tensor{data: d}), do: d
        def from_binary(d, type), do: %Nx.Tensor{data: d, type: type, shape: {div(byte_size(d), elem(type, 1) |> div(8))}}
        def reshape(%Nx.Tensor{} = t, shape), do: %{t | shape: shape}
        def type(%Nx.Tensor{type: t}), do: t
        def shape(%Nx.Tensor{shape: s}), do: s
      end
      """)
    end
  end

  test "Callbox.Nx against a stub Nx: from_nx, to_nx, call, and Nx tensors passed to Callbox.call" do
    if Code.ensure_loaded?(Nx) and function_exported?(Nx, :tensor, 2) do
      flunk("real Nx is loaded: test Callbox.Nx against it instead")
    end

    Stub.define()
    Code.compile_file(Path.join(TestGuests.root(), "elixir/lib/callbox/nx.ex"))
    assert Code.ensure_loaded?(Callbox.Nx)

    {:ok, host} = Callbox.open(TestGuests.config_path())
    data = <<1.0::float-32-native, 2.0::float-32-native, 3.0::float-32-native, 4.0::float-32-native>>
    t = struct(Nx.Tensor, data: data, type: {:f, 32}, shape: {2, 2})

    assert %Callbox.Tensor{data: ^data, type: {:f, 32}, shape: {2, 2}} = apply(Callbox.Nx, :from_nx, [t])
    assert {:ok, [out]} = apply(Callbox.Nx, :call, [host, "copy_mat", [t]])
    assert out.__struct__ == Nx.Tensor and out.data == data and out.shape == {2, 2} and out.type == {:f, 32}
    # an Nx tensor passed straight to Callbox.call
    assert {:ok, [%Callbox.Tensor{data: ^data, shape: {2, 2}}]} = Callbox.call(host, "copy_mat", [t])
    # pred results come back as {:u, 8}
    p = %Callbox.Tensor{data: <<1, 0>>, type: {:pred, 8}, shape: {2}}
    assert %{type: {:u, 8}, shape: {2}} = apply(Callbox.Nx, :to_nx, [p])
    u8 = struct(Nx.Tensor, data: <<1, 0, 1>>, type: {:u, 8}, shape: {3})
    assert {:ok, [%{type: {:u, 8}}]} = apply(Callbox.Nx, :call, [host, "copy_u8", [u8]])

    assert {:ok, [%Callbox.Tensor{type: {:pred, 8}, data: <<1, 0, 1>>}]} =
             Callbox.call(host, "copy_pred", [apply(Callbox.Nx, :from_nx, [u8, [type: {:pred, 8}]])])
  end
end
