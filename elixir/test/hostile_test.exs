defmodule Callbox.HostileTest do
  # The Go hostile suite's call-time cases (internal/hostile) through the
  # NIF, on both engines: each must fail with the kind Go's own run found
  # (docs/SECURITY.md's generated table, which `go test ./host` checks),
  # within its timeout plus a second, with the caller's input unchanged,
  # and the host must then serve a normal call.
  # Not async: each call's time is checked, and other tests' calls would
  # hold the dirty schedulers it waits for.
  use ExUnit.Case, async: false

  alias Callbox.{Error, Tensor, TestGuests}

  @kind_names %{
    "Timeout" => :timeout,
    "FuelExhausted" => :fuel_exhausted,
    "MemoryLimit" => :memory_limit,
    "StackOverflow" => :stack_overflow,
    "Unreachable" => :unreachable,
    "MemoryOutOfBounds" => :memory_out_of_bounds,
    "DivideByZero" => :divide_by_zero,
    "IntegerOverflow" => :integer_overflow,
    "InvalidConversion" => :invalid_conversion,
    "TableOutOfBounds" => :table_out_of_bounds,
    "IndirectCallMismatch" => :indirect_call_mismatch,
    "GuestError" => :guest_error,
    "ABIViolation" => :abi_violation,
    "ok" => :ok
  }

  setup_all do
    {:ok, host} = Callbox.open(TestGuests.hostile_config_path())
    {:ok, kit} = Callbox.open(TestGuests.config_path())
    %{host: host, kit: kit, go: TestGuests.go_results()}
  end

  @tag timeout: 300_000
  test "every case fails with Go's kind on both engines, and the host keeps serving", %{host: host, kit: kit, go: go} do
    x = Tensor.from_list([0.0, 1.0, 2.0, 3.0], {:f, 32})
    input = x.data

    results =
      for {name, _module, _tweak} <- TestGuests.hostile(), engine <- TestGuests.engines() do
        want = go |> Map.fetch!(name) |> Map.fetch!(engine)
        want_kind = Map.fetch!(@kind_names, want)
        cb = TestGuests.hostile_name(name, engine)
        {t, res} = :timer.tc(fn -> Callbox.call(host, cb, [x]) end)

        got =
          case res do
            {:ok, [_]} -> :ok
            {:error, %Error{kind: k, callback: ^cb}} -> k
            other -> {:unexpected, other}
          end

        assert x.data == input, "#{cb} changed the caller's input"
        assert t < 1_250_000 or want_kind == :ok, "#{cb} took #{div(t, 1000)} ms"
        # the host serves a normal call after every hostile one
        assert {:ok, [^x]} = Callbox.call(kit, "copy_f32", [x])
        {name, engine, want_kind, got}
      end

    mismatches =
      for {name, engine, want, got} <- results, want != got, do: "#{name}/#{engine}: Go #{want}, NIF #{inspect(got)}"

    assert mismatches == []
    kinds = results |> Enum.map(&elem(&1, 3)) |> Enum.uniq() |> Enum.sort()

    IO.puts(
      "\nhostile: #{length(results)} calls (#{length(TestGuests.hostile())} cases x 2 engines) matched Go's kinds: #{inspect(kinds)}"
    )

    for k <- [
          :timeout,
          :fuel_exhausted,
          :stack_overflow,
          :memory_limit,
          :divide_by_zero,
          :unreachable,
          :memory_out_of_bounds
        ],
        do: assert(k in kinds)
  end

  test "the codes of the kinds", %{host: host} do
    x = Tensor.from_list([0.0, 1.0, 2.0, 3.0], {:f, 32})

    for {name, code} <- [
          {"spin", :deadline_exceeded},
          {"grow_pages", :resource_exhausted},
          {"fill_flood", :resource_exhausted},
          {"div_by_zero", :internal},
          {"overrun_1", :internal},
          {"error_megabytes", :invalid_argument}
        ],
        engine <- TestGuests.engines() do
      assert {:error, %Error{code: ^code}} = Callbox.call(host, TestGuests.hostile_name(name, engine), [x])
    end
  end
end
