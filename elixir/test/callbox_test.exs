defmodule CallboxTest do
  use ExUnit.Case, async: true
  import Bitwise

  alias Callbox.{Error, Tensor, TestGuests}

  setup_all do
    {:ok, host} = Callbox.open(TestGuests.config_path())
    on_exit(fn -> Callbox.close(host) end)
    %{host: host}
  end

  defp f32(list), do: Tensor.from_list(list, {:f, 32})

  test "version and the library's dtype table" do
    assert Callbox.version() =~ ~r/^1\.\d+\.\d+$/
    types = Enum.map(Callbox.dtypes(), & &1.type)

    for t <- [
          {:pred, 8},
          {:s, 8},
          {:s, 64},
          {:u, 8},
          {:u, 64},
          {:f, 16},
          {:f, 32},
          {:f, 64},
          {:bf, 16},
          {:c, 64},
          {:c, 128}
        ],
        do: assert(t in types)

    assert %{name: :f32, bytes: 4, dlpack: {2, 32}} = Enum.find(Callbox.dtypes(), &(&1.type == {:f, 32}))
    assert %{name: :bf16, bytes: 2, dlpack: {4, 16}} = Enum.find(Callbox.dtypes(), &(&1.type == {:bf, 16}))
  end

  test "callbacks: names, content ids, signatures", %{host: host} do
    {:ok, cbs} = Callbox.callbacks(host)
    names = Enum.map(cbs, & &1.name)
    assert names == Enum.sort(names)
    eps = Enum.find(cbs, &(&1.name == "with_eps"))
    assert eps.signature == "(x: f32[n], eps: f32[]) -> (f32[n], f32[])"
    assert eps.id =~ ~r/^cb1-[0-9a-f]{64}$/
    assert {eps.num_inputs, eps.num_outputs, eps.engine} == {2, 2, "wazero"}
    # Its limits: the config's 250 ms timeout, the defaults' others, and
    # no stack needs of the caller on wazero.
    assert %{timeout_ns: 250_000_000, caller_stack: 0, max_memory: max_memory, fuel: 0} = eps.limits
    assert max_memory > 0
    assert {:ok, ^eps} = Callbox.callback(host, eps.id)
    assert {:error, %Error{kind: :unknown_callback, code: :not_found}} = Callbox.callback(host, "nope")
  end

  test "a call by name and by content id", %{host: host} do
    x = f32([1.0, -2.5, 3.0])
    assert {:ok, [y]} = Callbox.call(host, "copy_f32", [x])
    assert y == x
    {:ok, %{id: id}} = Callbox.callback(host, "copy_f32")
    assert Callbox.call!(host, id, [x]) == [x]
  end

  test "every dtype round-trips through a guest", %{host: host} do
    values = %{
      {:pred, 8} => [true, false, true],
      {:s, 8} => [-128, 0, 127],
      {:s, 16} => [-32768, 1, 32767],
      {:s, 32} => [-2_147_483_648, 2, 2_147_483_647],
      {:s, 64} => [-9_223_372_036_854_775_808, 3, 9_223_372_036_854_775_807],
      {:u, 8} => [0, 1, 255],
      {:u, 16} => [0, 1, 65535],
      {:u, 32} => [0, 1, 4_294_967_295],
      {:u, 64} => [0, 1, 18_446_744_073_709_551_615],
      {:f, 16} => [1.5, -2.0, :infinity],
      {:f, 32} => [1.5, :nan, :neg_infinity],
      {:f, 64} => [1.0e300, -0.5, 0.0],
      {:bf, 16} => [1.0, -2.0, 0.5],
      {:c, 64} => [{1.0, -1.0}, {0.5, 2.0}, {0.0, 0.0}],
      {:c, 128} => [{1.0e100, -1.0}, {0.5, 2.0}, {0.0, 0.0}]
    }

    for %{name: name, type: type} <- Callbox.dtypes() do
      x = Tensor.from_list(Map.fetch!(values, type), type)
      assert {:ok, [y]} = Callbox.call(host, "copy_#{name}", [x])
      assert y.type == type and y.shape == {3}
      assert y.data == x.data
      assert Tensor.to_list(y) == Map.fetch!(values, type)
    end
  end

  test "tuples {binary, type, shape}, scalars, matrices, several results", %{host: host} do
    assert {:ok, [%Tensor{type: {:f, 64}, shape: {}} = s]} =
             Callbox.call(host, "copy_scalar", [{<<42.0::float-64-native>>, {:f, 64}, {}}])

    assert Tensor.to_list(s) == 42.0
    m = Tensor.from_list([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], {:f, 32})
    assert m.shape == {2, 3}
    assert [%{shape: {2, 3}} = m2] = Callbox.call!(host, "copy_mat", [m])
    assert Tensor.to_list(m2) == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert [a, b] = Callbox.call!(host, "copy2", [Tensor.from_list([1, -2], {:s, 16}), f32([0.5, 1.5, 2.5])])
    assert {a.type, a.shape, Tensor.to_list(a)} == {{:s, 16}, {2}, [1, -2]}
    assert {b.type, b.shape, Tensor.to_list(b)} == {{:f, 32}, {3}, [0.5, 1.5, 2.5]}
    assert [%{shape: {0}}] = Callbox.call!(host, "copy_f32", [f32([])])
  end

  test "result types follow each call's input shapes (the NIF caches them per host)", %{host: host} do
    for n <- [1, 5, 1, 0, 9, 5, 100, 1, 3, 2, 7, 11, 13, 5] do
      x = f32(for i <- 1..n//1, do: i * 1.0)
      assert {:ok, [%{shape: {^n}} = y]} = Callbox.call(host, "copy_f32", [x])
      assert y == x
    end

    m = Tensor.from_list([[1.0], [2.0]], {:f, 32})
    assert [%{shape: {2, 1}}] = Callbox.call!(host, "copy_mat", [m])
    assert [%{shape: {1, 2}}] = Callbox.call!(host, "copy_mat", [Tensor.from_list([[1.0, 2.0]], {:f, 32})])
    assert {:error, %Error{kind: :invalid_argument}} = Callbox.call(host, "copy_mat", [f32([1.0])])
  end

  test "more inputs than the NIF keeps on its stack", %{host: host} do
    xs = for i <- 1..10, do: f32([i * 1.0, 0.0, 1.0])
    assert {:ok, [%Tensor{shape: {3}, type: {:f, 32}}]} = Callbox.call(host, "ten", xs)
    assert {:ok, [{{:f, 32}, {3}}]} = Callbox.output_types(host, "ten", xs)
    assert {:error, %Error{kind: :invalid_argument}} = Callbox.call(host, "ten", Enum.take(xs, 9))
  end

  test "output_types from types alone", %{host: host} do
    assert {:ok, [{{:f, 32}, {5}}, {{:f, 32}, {}}]} =
             Callbox.output_types(host, "with_eps", [{{:f, 32}, {5}}, {{:f, 32}, {}}])

    assert {:ok, [{{:s, 32}, {}}]} = Callbox.output_types(host, "bump", [f32([1.0])])

    assert {:error, %Error{kind: :invalid_argument, callback: "with_eps"}} =
             Callbox.output_types(host, "with_eps", [{{:f, 64}, {5}}, {{:f, 32}, {}}])
  end

  test "refused calls are :invalid_argument or :unknown_callback", %{host: host} do
    assert {:error, %Error{kind: :unknown_callback, code: :not_found, callback: "nope"}} =
             Callbox.call(host, "nope", [f32([1.0])])

    assert {:error, %Error{kind: :invalid_argument, code: :invalid_argument, message: m}} =
             Callbox.call(host, "copy_f32", [f32([1.0]), f32([2.0])])

    assert m =~ "takes 1"

    assert {:error, %Error{kind: :invalid_argument, message: m}} =
             Callbox.call(host, "copy_f32", [{<<1, 2, 3>>, {:f, 32}, {1}}])

    assert m =~ "is 4 bytes, its binary 3"

    assert {:error, %Error{kind: :invalid_argument, message: m}} =
             Callbox.call(host, "copy_f32", [Tensor.from_list([1], {:s, 32})])

    assert m =~ "s32"

    assert {:error, %Error{kind: :invalid_argument, message: m}} =
             Callbox.call(host, "copy_f32", [{<<>>, {:q, 7}, {0}}])

    assert m =~ "{:q, 7}"
    assert {:error, %Error{kind: :invalid_argument}} = Callbox.call(host, "copy_f32", [:not_a_tensor])
    assert_raise Error, ~r/InvalidArgument/, fn -> Callbox.call!(host, "copy_f32", []) end
  end

  test "a guest error carries the guest's message and status", %{host: host} do
    assert {:error, %Error{} = e} = Callbox.call(host, "fail", [f32([1.0])])

    assert {e.kind, e.code, e.guest_status, e.guest_message, e.callback} ==
             {:guest_error, :invalid_argument, 3, "bad input", "fail"}

    assert Exception.message(e) =~ "fail"
    assert Exception.message(e) =~ "bad input"
  end

  test "a timeout", %{host: host} do
    {t, res} = :timer.tc(fn -> Callbox.call(host, "spin", [f32([1.0])]) end)

    assert {:error, %Error{kind: :timeout, code: :deadline_exceeded, callback: "spin", chain: "", seq: 0} = e} = res
    assert e.message =~ "timeout"
    assert t < 2_000_000
    # Where the guest was (C API 1.12), also at the end of the text.
    assert [%{func: func, func_index: index, offset: offset} | _] = e.frames
    assert offset > 0
    assert e.text =~ "(at #{if func != "", do: func, else: "func[#{index}]"} @0x#{Integer.to_string(offset, 16) |> String.downcase()}"
    e = assert_raise Error, fn -> Callbox.call!(host, "spin", [f32([1.0])]) end
    assert e.kind == :timeout
  end

  test "open from a map, a keyword list and YAML text" do
    dir = TestGuests.dir()

    cfg = %{
      callbacks: %{c: %{module: "kit.wasm", export: "copy", signature: "(x: f32[n]) -> f32[n]", timeout: "100ms"}}
    }

    {:ok, h} = Callbox.open(cfg, base_dir: dir)
    assert [f32([1.0])] == Callbox.call!(h, "c", [f32([1.0])])
    :ok = Callbox.close(h)

    {:ok, h} =
      Callbox.open([callbacks: [c: [module: "kit.wasm", export: "copy", signature: "(x: f32[n]) -> f32[n]"]]],
        base_dir: dir
      )

    assert {:ok, [%{name: "c"}]} = Callbox.callbacks(h)

    yaml = "callbacks:\n  c:\n    module: kit.wasm\n    export: copy\n    signature: \"(x: u8[n]) -> u8[n]\"\n"
    {:ok, h} = Callbox.open_config(yaml, "yaml", base_dir: dir)
    assert [%{data: <<1, 2>>}] = Callbox.call!(h, "c", [{<<1, 2>>, {:u, 8}, {2}}])

    assert {:error, %Error{kind: :invalid_argument}} = Callbox.open(Path.join(dir, "missing.yaml"))
    assert_raise Error, fn -> Callbox.open!(%{callbacks: %{c: %{module: "missing.wasm"}}}, base_dir: dir) end
  end

  test "a closed host fails with :failed_precondition" do
    {:ok, h} = Callbox.open(TestGuests.config_path())
    :ok = Callbox.close(h)
    :ok = Callbox.close(h)

    assert {:error, %Error{kind: :failed_precondition, code: :failed_precondition}} =
             Callbox.call(h, "copy_f32", [f32([1.0])])
  end

  test "taps and the barrier", %{host: host} do
    {:ok, h} = Callbox.open(TestGuests.config_path())
    :ok = Callbox.tap(h, "copy_f32", [f32([1.0])])
    :ok = Callbox.tap(h, "fail", [f32([1.0])])
    assert {:error, %Error{kind: :guest_error, callback: "fail"}} = Callbox.barrier(h)
    assert :ok = Callbox.barrier(h)
    _ = host
  end

  test "chains: ordered calls and taps, the failure that fails the chain, reset", %{host: host} do
    chain = Callbox.chain(host, "chain-#{System.unique_integer([:positive])}")
    x = f32([1.0, 2.0])
    assert {:ok, [^x]} = Callbox.Chain.call(chain, "copy_f32", [x])
    :ok = Callbox.Chain.tap(chain, "copy_f32", [x])
    :ok = Callbox.Chain.barrier(chain)

    assert {:error, %Error{kind: :guest_error, chain: name, seq: 3, failed: nil}} =
             Callbox.Chain.call(chain, "fail", [x])

    assert name == chain.name

    assert {:error, %Error{kind: :guest_error, callback: "copy_f32", seq: 4, failed: failed}} =
             Callbox.Chain.call(chain, "copy_f32", [x])

    assert %{callback: "fail", seq: 3} = failed
    assert_raise Error, fn -> Callbox.Chain.call!(chain, "copy_f32", [x]) end
    :ok = Callbox.Chain.tap(chain, "copy_f32", [x])
    # the barrier reports the chain's first failure: the failed step itself
    assert {:error, %Error{kind: :guest_error, callback: "fail", seq: 3}} = Callbox.Chain.barrier(chain)
    :ok = Callbox.Chain.reset(chain)
    assert {:ok, [^x]} = Callbox.Chain.call(chain, "copy_f32", [x])
  end

  test "guest log lines to a process", %{host: host} do
    :ok = Callbox.route_logs(self(), :info)

    try do
      assert {:ok, _} = Callbox.call(host, "say", [f32([1.0])])
      assert_receive {:callbox_log, 0, "say", "hello from kit" <> _}, 2000
    after
      :ok = Callbox.route_logs(nil)
    end
  end

  test "an unknown option is refused, naming it, not ignored", %{host: host} do
    x = f32([1.0])
    assert {:error, %Error{kind: :invalid_argument, callback: "copy_f32", message: msg}} =
             Callbox.call(host, "copy_f32", [x], tmeout: 50)
    assert msg =~ ":tmeout"
    assert {:error, %Error{kind: :invalid_argument}} = Callbox.call(host, "copy_f32", [x], asynch: true)
    assert {:error, 0, %Error{kind: :invalid_argument}} = Callbox.call_many(host, "copy_f32", [[x]], inline: 5)
    assert {:ok, [_]} = Callbox.call(host, "copy_f32", [x], inline_us: 0, async: false)
  end

  test "bad input is {:error, %Callbox.Error{}} naming it, never a bare ArgumentError", %{host: host} do
    x = f32([1.0])
    bad = fn t -> Callbox.call(host, "copy_f32", [t]) end
    assert {:error, %Error{kind: :invalid_argument, message: m1}} = bad.(%Tensor{x | data: [1, 2]})
    assert m1 =~ "input 0: data"
    assert {:error, %Error{kind: :invalid_argument, message: m2}} = bad.(%Tensor{x | shape: [1]})
    assert m2 =~ "shape [1] is not a tuple"
    assert {:error, %Error{kind: :invalid_argument, message: m3}} = bad.(%Tensor{x | shape: {1.5}})
    assert m3 =~ "dimension 1.5"
    assert {:error, %Error{kind: :invalid_argument, message: m4}} = bad.(%Tensor{x | shape: {1 <<< 70}})
    assert m4 =~ "dimension"
    assert {:error, %Error{kind: :invalid_argument, message: m5}} = Callbox.call(host, 'copy_f32', [x])
    assert m5 =~ "callback name"
    assert {:error, %Error{kind: :invalid_argument, message: m6}} = Callbox.call(host, "copy\0f32", [x])
    assert m6 =~ "NUL"
    assert {:ok, [_]} = Callbox.call(host, :copy_f32, [x]), "an atom names a callback"
    assert {:ok, [_]} = Callbox.call(host, :copy_f32, [x], async: true)

    # The same through the threaded route (async: true, inline_us: 0).
    for opts <- [[async: true], [inline_us: 0]] do
      assert {:error, %Error{kind: :invalid_argument, message: m7}} =
               Callbox.call(host, "copy_f32", [%Tensor{x | data: [1, 2]}], opts)
      assert m7 =~ "input 0: data"
      assert {:error, %Error{kind: :invalid_argument, message: m8}} =
               Callbox.call(host, "copy_f32", [%Tensor{x | shape: {1.5}}], opts)
      assert m8 =~ "dimension 1.5"
    end
  end

  test "a host that is not one (forged, a cancel token, nil) is {:error, %Callbox.Error{}} in every host function" do
    x = f32([1.0])
    forged = %Callbox.Host{ref: make_ref()}

    for host <- [forged, Callbox.cancel_token(), nil] do
      not_a_host = fn
        {:error, %Error{kind: :invalid_argument, message: m}} -> m =~ "is not a host"
        {:error, 0, %Error{kind: :invalid_argument, message: m}} -> m =~ "is not a host"
        _ -> false
      end

      for {what, result} <- [
            call: Callbox.call(host, "copy_f32", [x]),
            call_opts: Callbox.call(host, "copy_f32", [x], inline_us: 0),
            call_async: Callbox.call(host, "copy_f32", [x], async: true),
            call_many: Callbox.call_many(host, "copy_f32", [[x]]),
            tap: Callbox.tap(host, "copy_f32", [x]),
            barrier: Callbox.barrier(host),
            close: Callbox.close(host),
            callbacks: Callbox.callbacks(host),
            callback: Callbox.callback(host, "copy_f32"),
            output_types: Callbox.output_types(host, "copy_f32", [x])
          ] ++ if(host, do: [set_default_host: Callbox.set_default_host(host)], else: []) do
        assert not_a_host.(result), "#{what} with host #{inspect(host)}: #{inspect(result)}"
      end
    end
  end

  test "kind 20, overloaded, has its atom" do
    assert {:error, %Error{kind: :overloaded, code: :resource_exhausted}} =
             {:error, Error.from_native({20, 8, 0, 0, "Overloaded", "c", "", "busy", "", "busy", "", 0, "", []})}
  end
end

defmodule CallboxManyTest do
  use ExUnit.Case, async: true
  alias Callbox.{Error, Tensor, TestGuests}

  test "call_many: several calls in order in one dirty trip, stopping at the first failure" do
    {:ok, host} = Callbox.open(TestGuests.config_path())
    xs = for i <- 1..20, do: [Tensor.from_list([i * 1.0, -i * 1.0], {:f, 32})]
    assert {:ok, outs} = Callbox.call_many(host, "copy_f32", xs)
    assert outs == xs
    # bump counts its instance's calls (max_instances: 1): the calls ran in order
    assert {:ok, counts} = Callbox.call_many(host, "bump", for(_ <- 1..5, do: [Tensor.from_list([0.0], {:f, 32})]))
    assert Enum.map(counts, fn [c] -> Tensor.to_list(c) end) == [1, 2, 3, 4, 5]
    bad = List.replace_at(xs, 3, [Tensor.from_list([1], {:s, 32})])
    assert {:error, 3, %Error{kind: :invalid_argument}} = Callbox.call_many(host, "copy_f32", bad)

    assert {:error, 3, %Error{kind: :invalid_argument}} =
             Callbox.call_many(host, "copy_f32", List.replace_at(xs, 3, [:x]))

    assert {:error, 0, %Error{kind: :guest_error}} = Callbox.call_many(host, "fail", xs)
    assert {:ok, []} = Callbox.call_many(host, "copy_f32", [])
  end
end
