defmodule Callbox.DoorsTest do
  # The door-conformance table (ffi/doors_test.go) through the Elixir door:
  # every request the table gives Elixir must end here as it ended through
  # the Go API: the same kind, the same code, the same text ("<kind>: <the
  # Go error's text>", as callbox_error.text is), or success with the same
  # output bytes (FNV-1a 64, as the Go door hashes them). Elixir's calls
  # allocate their results, so the table gives it the requests whose
  # outputs are the ones the signature derives.
  use ExUnit.Case, async: false

  alias Callbox.{Error, Tensor}

  @table Path.join(__DIR__, "fixtures/doors.terms")

  setup_all do
    {:ok, terms} = :file.consult(@table)
    [{:config, config}] = for {:config, _} = t <- terms, do: t

    text =
      config
      |> String.replace("{dir}", Callbox.TestGuests.dir())
      |> String.replace("{scale}", Path.join(Callbox.TestGuests.root(), "guests/prebuilt/rust-scale.wasm"))
      |> String.replace("{worker}", Path.join(Callbox.TestGuests.root(), "build/callbox-worker"))

    {:ok, host} = Callbox.open_config(text, "yaml")
    {:ok, closed} = Callbox.open_config(text, "yaml")
    :ok = Callbox.close(closed)
    on_exit(fn -> Callbox.close(host) end)
    cases = for {:door, _, _, _, _, _} = t <- terms, do: t
    %{host: host, closed: closed, cases: cases}
  end

  @types %{"f32" => {:f, 32}, "f64" => {:f, 64}, "s16" => {:s, 16}, "pred" => {:pred, 8}}

  defp tensor({dtype, dims, fill}) do
    n = Enum.reduce(dims, 1, &(&1 * &2))
    neg = if String.starts_with?(fill, "neg@"), do: String.to_integer(String.slice(fill, 4..-1//1)), else: -1

    data =
      for i <- 0..(n - 1)//1, into: <<>> do
        v = if i == neg, do: -1, else: i

        case dtype do
          "f32" -> <<v::float-32-native>>
          "f64" -> <<v::float-64-native>>
          "s16" -> <<v::signed-16-native>>
          "pred" -> <<Bitwise.band(v, 1)::8>>
        end
      end

    Tensor.new(data, Map.fetch!(@types, dtype), List.to_tuple(dims))
  end

  defp fnv(binaries) do
    Enum.reduce(binaries, 14_695_981_039_346_656_037, fn bin, h ->
      for <<b <- bin>>, reduce: h do
        h -> Bitwise.band(Bitwise.bxor(h, b) * 1_099_511_628_211, 0xFFFF_FFFF_FFFF_FFFF)
      end
    end)
    |> Integer.to_string(16)
    |> String.downcase()
    |> String.pad_leading(16, "0")
  end

  # Content ids hash the module's bytes; this door's kit.wasm comes from
  # wat2wasm, the Go door's from its own assembler.
  defp ids(text), do: Regex.replace(~r/cb1-[0-9a-f]{64}/, text, "cb1-<id>")

  test "every request ends as it ends through the Go API", %{host: host, closed: closed, cases: cases} do
    assert length(cases) >= 20

    for {:door, id, callback, chain, inputs, {kind, code, message, outputs}} <- cases do
      {target, name} =
        cond do
          callback == "@closed" -> {closed, "copy"}
          String.starts_with?(callback, "@id:") -> {host, Callbox.callback(host, String.slice(callback, 4..-1//1)) |> elem(1) |> Map.fetch!(:id)}
          true -> {host, callback}
        end

      args = Enum.map(inputs, &tensor/1)
      got = if chain == "", do: Callbox.call(target, name, args), else: Callbox.Chain.call(Callbox.chain(target, chain), name, args)

      case got do
        {:ok, results} ->
          assert kind == "OK", "#{id}: Elixir ran a request the Go API refused: #{message}"
          assert fnv(Enum.map(results, & &1.data)) == outputs, "#{id}: output bytes"

        {:error, %Error{} = e} ->
          assert {e.kind_name, e.code_number, ids(e.text)} == {kind, code, ids(kind <> ": " <> message)}, id
      end
    end
  end
end
