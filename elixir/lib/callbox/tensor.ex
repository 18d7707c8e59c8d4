defmodule Callbox.Tensor do
  @moduledoc """
  A dense, row-major tensor in host memory, as Nx sees one without
  depending on Nx: a binary of native-endian elements, a type and a shape.

    * `:data` - the elements, native byte order, row-major
    * `:type` - an Nx-style type: `{:f, 32}`, `{:f, 16}`, `{:bf, 16}`,
      `{:s, 64}`, `{:u, 8}`, `{:c, 64}`, `{:pred, 8}` (callbox's boolean: one
      byte, 0 or 1; Nx has none and uses `{:u, 8}`), ...
    * `:shape` - a tuple of dimensions, `{}` for a scalar

  Which types exist is libcallbox's table (`callbox_dtypes`, see
  `Callbox.dtypes/0`); a type maps to its callbox dtype name by the rule
  `{:f, 32} -> :f32`, `{:bf, 16} -> :bf16`, `{:pred, 8} -> :pred`.

  Passed to a call, the binary itself is handed to libcallbox (no copy in
  the binding); a call's results are new binaries.
  """

  @enforce_keys [:data, :type, :shape]
  defstruct [:data, :type, :shape]

  @type type :: {:f | :bf | :s | :u | :c | :pred, pos_integer()}
  @type t :: %__MODULE__{data: binary(), type: type(), shape: tuple()}

  @doc "A tensor of `data` (a binary of native-endian elements), checking its size."
  def new(data, type, shape) when is_binary(data) and is_tuple(shape) do
    bytes = type_bytes!(type)
    n = elements(shape)

    if byte_size(data) != n * bytes do
      raise ArgumentError,
            "a #{dtype_name!(type)} tensor of shape #{inspect(shape)} is #{n * bytes} bytes, the binary #{byte_size(data)}"
    end

    %__MODULE__{data: data, type: type, shape: shape}
  end

  @doc """
  A tensor from a number or a (nested) list of numbers. Floats take
  `:nan`, `:infinity` and `:neg_infinity` as Nx does; complex elements are
  `{re, im}` or plain numbers; pred elements are booleans or 0/1.
  """
  def from_list(list, type) do
    shape = infer_shape(list)
    flat = if is_list(list), do: List.flatten(list), else: [list]
    data = for v <- flat, into: <<>>, do: encode(v, type)
    %__MODULE__{data: data, type: validate_type!(type), shape: shape}
  end

  @doc "A scalar (shape `{}`)."
  def scalar(value, type), do: from_list(value, type)

  @doc "The elements as a flat list (row-major)."
  def to_flat_list(%__MODULE__{data: data, type: type}), do: decode_all(data, type, [])

  @doc "The elements as nested lists of the tensor's shape (a scalar: the element)."
  def to_list(%__MODULE__{shape: shape} = t) do
    flat = to_flat_list(t)

    case Tuple.to_list(shape) do
      [] -> hd(flat)
      dims -> nest(flat, dims)
    end
  end

  @doc "The number of elements of a shape."
  def elements(shape) when is_tuple(shape), do: shape |> Tuple.to_list() |> Enum.reduce(1, &(&1 * &2))

  @doc "The callbox dtype name of a type (`{:f, 32}` -> `:f32`), raising for one libcallbox lacks."
  def dtype_name!(type) do
    case Map.fetch(tables().by_type, type) do
      {:ok, {name, _bytes}} ->
        name

      :error ->
        raise ArgumentError,
              "type #{inspect(type)} has no callbox dtype (callbox has: " <>
                Enum.map_join(Callbox.dtypes(), ", ", &inspect(&1.type)) <> ")"
    end
  end

  @doc "The type of a callbox dtype name (`:f32` -> `{:f, 32}`)."
  def type_of(name) when is_atom(name), do: Map.fetch!(tables().by_name, name)

  @doc "Bytes per element of a type."
  def type_bytes!(type) do
    dtype_name!(type)
    elem(Map.fetch!(tables().by_type, type), 1)
  end

  defp validate_type!(type) do
    dtype_name!(type)
    type
  end

  @doc false
  # {by_type: %{type => {name, bytes}}, by_name: %{name => type}, infos: [...]},
  # from libcallbox's dtype table, read once.
  def tables do
    case :persistent_term.get({__MODULE__, :tables}, nil) do
      nil ->
        infos =
          case Callbox.Native.dtypes() do
            {:ok, list} -> list
            {:error, e} -> raise Callbox.Error.from_native(e)
          end

        infos =
          for {name, bytes, code, bits, xla} <- infos do
            %{name: name, type: parse_name(Atom.to_string(name)), bytes: bytes, dlpack: {code, bits}, xla: xla}
          end

        t = %{
          by_type: Map.new(infos, &{&1.type, {&1.name, &1.bytes}}),
          by_name: Map.new(infos, &{&1.name, &1.type}),
          infos: infos
        }

        :persistent_term.put({__MODULE__, :tables}, t)
        t

      t ->
        t
    end
  end

  # A callbox dtype name as an Nx-style type: the mapping of names, not a
  # second dtype table ("f32" -> {:f, 32}, "bf16" -> {:bf, 16}, "pred" -> {:pred, 8}).
  defp parse_name("pred"), do: {:pred, 8}
  defp parse_name("bf" <> bits), do: {:bf, String.to_integer(bits)}

  defp parse_name(<<k, bits::binary>>) when k in [?f, ?s, ?u, ?c],
    do: {String.to_existing_atom(<<k>>), String.to_integer(bits)}

  defp infer_shape(list) when is_list(list) do
    case list do
      [] -> {0}
      [h | _] -> List.to_tuple([length(list) | Tuple.to_list(infer_shape(h))])
    end
  end

  defp infer_shape(_), do: {}

  defp nest(flat, [_]), do: flat

  defp nest(flat, [_ | rest]) do
    size = Enum.reduce(rest, 1, &(&1 * &2))
    if size == 0, do: [], else: flat |> Enum.chunk_every(size) |> Enum.map(&nest(&1, rest))
  end

  # ---- element codecs ----

  @doc false
  def encode(v, {:pred, 8}), do: <<if(v in [true, 1], do: 1, else: 0)>>
  def encode(v, {:s, b}), do: <<v::signed-integer-size(b)-native>>
  def encode(v, {:u, b}), do: <<v::unsigned-integer-size(b)-native>>
  def encode(v, {:f, b}), do: float_bits(v, b)

  def encode(v, {:bf, 16}) do
    <<bits::32>> = float_bits_big(v)
    # round to nearest even on the dropped 16 bits (NaN stays NaN)
    rounded =
      if Bitwise.band(bits, 0x7F800000) == 0x7F800000,
        do: Bitwise.bsr(bits, 16) |> Bitwise.bor(if(Bitwise.band(bits, 0xFFFF) != 0, do: 0x40, else: 0)),
        else: Bitwise.bsr(bits + 0x7FFF + Bitwise.band(Bitwise.bsr(bits, 16), 1), 16)

    <<rounded::16-native>>
  end

  def encode({re, im}, {:c, b}), do: float_bits(re, div(b, 2)) <> float_bits(im, div(b, 2))
  def encode(v, {:c, b}), do: encode({v, 0.0}, {:c, b})

  defp float_bits(v, b) when is_number(v), do: <<v::float-size(b)-native>>
  defp float_bits(:nan, 16), do: <<0x7E00::16-native>>
  defp float_bits(:infinity, 16), do: <<0x7C00::16-native>>
  defp float_bits(:neg_infinity, 16), do: <<0xFC00::16-native>>
  defp float_bits(:nan, 32), do: <<0x7FC00000::32-native>>
  defp float_bits(:infinity, 32), do: <<0x7F800000::32-native>>
  defp float_bits(:neg_infinity, 32), do: <<0xFF800000::32-native>>
  defp float_bits(:nan, 64), do: <<0x7FF8000000000000::64-native>>
  defp float_bits(:infinity, 64), do: <<0x7FF0000000000000::64-native>>
  defp float_bits(:neg_infinity, 64), do: <<0xFFF0000000000000::64-native>>

  defp float_bits_big(v) do
    <<bits::32-native>> = float_bits(v, 32)
    <<bits::32>>
  end

  defp decode_all(<<>>, _type, acc), do: Enum.reverse(acc)

  defp decode_all(data, type, acc) do
    {v, rest} = decode(data, type)
    decode_all(rest, type, [v | acc])
  end

  defp decode(<<v, rest::binary>>, {:pred, 8}), do: {v != 0, rest}

  defp decode(data, {:s, b}) do
    <<v::signed-integer-size(b)-native, rest::binary>> = data
    {v, rest}
  end

  defp decode(data, {:u, b}) do
    <<v::unsigned-integer-size(b)-native, rest::binary>> = data
    {v, rest}
  end

  defp decode(data, {:f, b}), do: decode_float(data, b)

  defp decode(<<bits::16-native, rest::binary>>, {:bf, 16}) do
    {v, <<>>} = decode_float(<<Bitwise.bsl(bits, 16)::32-native>>, 32)
    {v, rest}
  end

  defp decode(data, {:c, b}) do
    {re, rest} = decode_float(data, div(b, 2))
    {im, rest} = decode_float(rest, div(b, 2))
    {{re, im}, rest}
  end

  defp decode_float(data, b) do
    case data do
      <<v::float-size(b)-native, rest::binary>> ->
        {v, rest}

      <<bits::size(b)-native, rest::binary>> ->
        mant = Bitwise.band(bits, Bitwise.bsl(1, mant_bits(b)) - 1)
        neg = Bitwise.bsr(bits, b - 1) == 1
        {if(mant != 0, do: :nan, else: if(neg, do: :neg_infinity, else: :infinity)), rest}
    end
  end

  defp mant_bits(16), do: 10
  defp mant_bits(32), do: 23
  defp mant_bits(64), do: 52

  defimpl Inspect do
    import Inspect.Algebra

    def inspect(%{type: type, shape: shape} = t, opts) do
      elems = Callbox.Tensor.elements(shape)
      values = if elems <= 16, do: Callbox.Tensor.to_list(t), else: "#{byte_size(t.data)} bytes"

      concat([
        "#Callbox.Tensor<",
        to_doc(type, opts),
        to_doc(shape, opts),
        " ",
        to_doc(values, opts),
        ">"
      ])
    end
  end
end
