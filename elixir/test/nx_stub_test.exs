defmodule Callbox.NxStubTest do
  # Callbox.Nx calls Nx only at run time, and Nx cannot be installed here
  # (no Hex). These tests define a stub Nx (below: the functions Callbox.Nx
  # uses, on a binary-backed struct; runtime_call/4 does what Nx's does
  # outside defn: run the function and check its result against the
  # template) and run Callbox.Nx against it, so the module's own logic
  # runs; they say nothing about real Nx.
  use ExUnit.Case, async: false

  alias Callbox.TestGuests

  defmodule Stub do
    # What the stub stands for: Nx.Tensor with the binary backend.
    def define do
      unless Code.ensure_loaded?(Nx) and function_exported?(Nx, :stub?, 0) do
        Code.compile_string("""
        defmodule Nx.Tensor do
          defstruct [:data, :type, :shape, vectorized_axes: []]
        end

        defmodule Nx do
          def stub?, do: true
          def to_binary(%Nx.Tensor{data: d}), do: d
          def from_binary(d, type), do: %Nx.Tensor{data: d, type: type, shape: {div(byte_size(d), elem(type, 1) |> div(8))}}
          def reshape(%Nx.Tensor{} = t, shape), do: %{t | shape: shape}
          def type(%Nx.Tensor{type: t}), do: t
          def shape(%Nx.Tensor{shape: s}), do: s
          def template(shape, type), do: %Nx.Tensor{data: :template, type: type, shape: shape}

          def runtime_call(out, container, opts, fun) when is_function(fun, 2) do
            result = fun.(container, opts)
            unless compatible?(result, out), do: raise(ArgumentError, "result \#{inspect(result)} does not match \#{inspect(out)}")
            result
          end

          defp compatible?(%Nx.Tensor{type: t, shape: s}, %Nx.Tensor{type: t, shape: s}), do: true
          defp compatible?(a, b) when is_tuple(a) and is_tuple(b) and tuple_size(a) == tuple_size(b),
            do: Enum.all?(Enum.zip(Tuple.to_list(a), Tuple.to_list(b)), fn {x, y} -> compatible?(x, y) end)
          defp compatible?(_, _), do: false
        end
        """)
      end

      if function_exported?(Nx, :tensor, 2), do: raise("real Nx is loaded: test Callbox.Nx against it instead")
    end
  end

  defp tmpl(shape, type), do: apply(Nx, :template, [shape, type])

  defp f32(values), do: for(v <- values, into: <<>>, do: <<v::float-32-native>>)

  setup_all do
    Stub.define()
    {:ok, host} = Callbox.open(TestGuests.config_path())
    %{host: host}
  end

  test "from_nx, to_nx, call, and Nx tensors passed to Callbox.call", %{host: host} do
    data = f32([1.0, 2.0, 3.0, 4.0])
    t = struct(Nx.Tensor, data: data, type: {:f, 32}, shape: {2, 2})

    assert %Callbox.Tensor{data: ^data, type: {:f, 32}, shape: {2, 2}} = Callbox.Nx.from_nx(t)
    assert {:ok, [out]} = Callbox.Nx.call(host, "copy_mat", [t])
    assert out.__struct__ == Nx.Tensor and out.data == data and out.shape == {2, 2} and out.type == {:f, 32}
    # an Nx tensor passed straight to Callbox.call
    assert {:ok, [%Callbox.Tensor{data: ^data, shape: {2, 2}}]} = Callbox.call(host, "copy_mat", [t])
    # pred results come back as {:u, 8}
    p = %Callbox.Tensor{data: <<1, 0>>, type: {:pred, 8}, shape: {2}}
    assert %{type: {:u, 8}, shape: {2}} = Callbox.Nx.to_nx(p)
    u8 = struct(Nx.Tensor, data: <<1, 0, 1>>, type: {:u, 8}, shape: {3})
    assert {:ok, [%{type: {:u, 8}}]} = Callbox.Nx.call(host, "copy_u8", [u8])

    assert {:ok, [%Callbox.Tensor{type: {:pred, 8}, data: <<1, 0, 1>>}]} =
             Callbox.call(host, "copy_pred", [Callbox.Nx.from_nx(u8, type: {:pred, 8})])
  end

  test "a vectorized tensor is refused, naming its vectorized axes", %{host: host} do
    t = struct(Nx.Tensor, data: f32([1.0, 2.0, 3.0, 4.0]), type: {:f, 32}, shape: {2}, vectorized_axes: [rows: 2])

    assert {:error, %Callbox.Error{kind: :invalid_argument, message: msg}} = Callbox.call(host, "copy_f32", [t])
    assert msg =~ "vectorized axes [rows: 2]" and msg =~ "Nx.devectorize"
    assert {:error, %Callbox.Error{kind: :invalid_argument}} = Callbox.Nx.call(host, "copy_f32", [t])
  end

  test "template/3 derives the output template from the callback's signature", %{host: host} do
    x = tmpl({5}, {:s, 16})
    y = tmpl({3}, {:f, 32})
    assert {:ok, {%{__struct__: Nx.Tensor, type: {:s, 16}, shape: {5}}, %{__struct__: Nx.Tensor, type: {:f, 32}, shape: {3}}}} =
             Callbox.Nx.template(host, "copy2", [x, y])

    assert {:ok, %{__struct__: Nx.Tensor, type: {:f, 32}, shape: {2, 7}}} = Callbox.Nx.template(host, "copy_mat", [tmpl({2, 7}, {:f, 32})])
    # the library judges the types: a wrong dtype is its error
    assert {:error, %Callbox.Error{kind: :invalid_argument, callback: "copy_mat"}} =
             Callbox.Nx.template(host, "copy_mat", [tmpl({2, 7}, {:f, 64})])
  end

  test "runtime_call/3 runs the callback through Nx.runtime_call with the derived template", %{host: host} do
    x = struct(Nx.Tensor, data: f32([1.5, -2.0]), type: {:f, 32}, shape: {2})
    assert %{__struct__: Nx.Tensor, data: data, type: {:f, 32}, shape: {2}} = Callbox.Nx.runtime_call(host, "copy_f32", x)
    assert data == x.data

    xs = struct(Nx.Tensor, data: <<7::signed-16-native, 8::signed-16-native>>, type: {:s, 16}, shape: {2})
    assert {%{__struct__: Nx.Tensor, type: {:s, 16}, data: d1}, %{__struct__: Nx.Tensor, type: {:f, 32}, data: d2}} =
             Callbox.Nx.runtime_call(host, "copy2", {xs, x})

    assert d1 == xs.data and d2 == x.data
    # a failed call raises the callback's error inside the computation
    assert_raise Callbox.Error, ~r/fail/, fn -> Callbox.Nx.runtime_call(host, "fail", x) end
    assert_raise Callbox.Error, ~r/not a host/, fn -> Callbox.Nx.runtime_call(:nope, "copy_f32", x) end
  end
end
