defmodule Callbox.JSON do
  @moduledoc false
  # A tiny JSON encoder for configurations given as maps or keyword lists
  # (Elixir 1.14 has no JSON module, and this package takes no Hex
  # dependencies). Maps and keyword lists become objects, other lists
  # arrays, atoms strings (true, false and nil their JSON values).

  def encode!(term), do: term |> enc() |> IO.iodata_to_binary()

  defp enc(nil), do: "null"
  defp enc(true), do: "true"
  defp enc(false), do: "false"
  defp enc(a) when is_atom(a), do: str(Atom.to_string(a))
  defp enc(s) when is_binary(s), do: str(s)
  defp enc(i) when is_integer(i), do: Integer.to_string(i)
  defp enc(f) when is_float(f), do: :erlang.float_to_binary(f, [:short])
  defp enc(m) when is_map(m) and not is_struct(m), do: obj(Map.to_list(m))

  defp enc(l) when is_list(l) do
    if l != [] and Keyword.keyword?(l), do: obj(l), else: ["[", Enum.map_intersperse(l, ",", &enc/1), "]"]
  end

  defp enc(other), do: raise(ArgumentError, "cannot encode #{inspect(other)} as JSON")

  defp obj(pairs) do
    ["{", Enum.map_intersperse(pairs, ",", fn {k, v} -> [key(k), ":", enc(v)] end), "}"]
  end

  defp key(k) when is_atom(k), do: str(Atom.to_string(k))
  defp key(k) when is_binary(k), do: str(k)
  defp key(k), do: raise(ArgumentError, "JSON object keys are strings or atoms, got #{inspect(k)}")

  defp str(s) do
    [?", escape(s, []), ?"]
  end

  defp escape(<<>>, acc), do: Enum.reverse(acc)
  defp escape(<<?", rest::binary>>, acc), do: escape(rest, ["\\\"" | acc])
  defp escape(<<?\\, rest::binary>>, acc), do: escape(rest, ["\\\\" | acc])
  defp escape(<<?\n, rest::binary>>, acc), do: escape(rest, ["\\n" | acc])
  defp escape(<<?\r, rest::binary>>, acc), do: escape(rest, ["\\r" | acc])
  defp escape(<<?\t, rest::binary>>, acc), do: escape(rest, ["\\t" | acc])

  defp escape(<<c, rest::binary>>, acc) when c < 0x20,
    do: escape(rest, [:io_lib.format(~c"\\u~4.16.0b", [c]) | acc])

  defp escape(<<c, rest::binary>>, acc), do: escape(rest, [c | acc])
end
