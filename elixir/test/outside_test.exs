defmodule Callbox.OutsideTest do
  # An Elixir script run by `elixir` in a directory outside the repository
  # (with only the compiled package on its code path, and no CALLBOX_LIB)
  # calls the shipped demo callbacks (guests/prebuilt: Rust, AssemblyScript,
  # C) and prints its results' bytes; the Go API, through the callbox CLI
  # (`callbox run`, host.Invoke), computes the same calls from .npy files.
  # The bytes must be identical.
  use ExUnit.Case, async: true

  alias Callbox.{Tensor, TestGuests}

  @cases [
    {"scale", [{[1.0, -2.0, 3.5, 0.0, 1.0e-3, 7.25], {6}}, {2.5, {}}]},
    {"softmax", [{[0.1, 0.2, 3.0, -1.0, 0.0, 0.5, 2.0, 8.0], {2, 4}}]},
    {"matmul", [{[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], {2, 3}}, {[0.5, -1.0, 2.0, 0.25, 3.0, 1.5], {3, 2}}]}
  ]

  @tag timeout: 300_000
  test "a script outside the repository gets the Go API's numbers" do
    root = TestGuests.root()
    tmp = Path.join(System.tmp_dir!(), "callbox-elixir-outside-#{System.unique_integer([:positive])}")
    File.mkdir_p!(tmp)
    on_exit(fn -> File.rm_rf!(tmp) end)
    refute String.starts_with?(Path.expand(tmp), root <> "/")

    File.write!(Path.join(tmp, "callbox.yaml"), """
    callbacks:
      scale:
        module: #{root}/guests/prebuilt/rust-scale.wasm
      softmax:
        module: #{root}/guests/prebuilt/assemblyscript-softmax.wasm
      matmul:
        module: #{root}/guests/prebuilt/c-freestanding-matmul.wasm
    """)

    File.write!(Path.join(tmp, "script.exs"), """
    {:ok, host} = Callbox.open("callbox.yaml")
    cases = #{inspect(@cases)}

    for {name, inputs} <- cases do
      tensors =
        for {values, shape} <- inputs do
          flat = if is_list(values), do: values, else: [values]
          %Callbox.Tensor{data: Callbox.Tensor.from_list(flat, {:f, 32}).data, type: {:f, 32}, shape: shape}
        end

      [y] = Callbox.call!(host, name, tensors)
      IO.puts(name <> " " <> inspect(y.shape) <> " " <> Base.encode16(y.data))
    end
    """)

    ebin = :code.lib_dir(:callbox, :ebin) |> List.to_string()
    env = [{"CALLBOX_LIB", nil}, {"CALLBOX_CONFIG", nil}, {"MIX_ENV", nil}]
    {out, status} = System.cmd("elixir", ["-pa", ebin, "script.exs"], cd: tmp, env: env, stderr_to_stdout: true)
    assert status == 0, out

    elixir_results =
      for line <- String.split(out, "\n", trim: true), [name, rest] <- [String.split(line, " ", parts: 2)], into: %{} do
        [shape, hex] = Regex.run(~r/^(\{.*\}) ([0-9A-F]*)$/, rest, capture: :all_but_first)
        {name, {shape, Base.decode16!(hex)}}
      end

    cli = callbox_cli(root, tmp)

    for {name, inputs} <- @cases do
      ins =
        for {{values, shape}, i} <- Enum.with_index(inputs) do
          flat = if is_list(values), do: values, else: [values]
          path = Path.join(tmp, "#{name}.in#{i}.npy")
          File.write!(path, npy(Tensor.from_list(flat, {:f, 32}).data, shape))
          ["--in", path]
        end

      out_path = Path.join(tmp, "#{name}.out.npy")

      {log, 0} =
        System.cmd(cli, ["run", "-c", Path.join(tmp, "callbox.yaml"), name | List.flatten(ins)] ++ ["--out", out_path],
          stderr_to_stdout: true
        )

      {go_shape, go_data} = read_npy(File.read!(out_path))
      {shape, data} = Map.fetch!(elixir_results, name)
      assert shape == inspect(go_shape), "#{name}: #{log}"
      assert data == go_data, "#{name}: Elixir and Go results differ"
      assert byte_size(data) > 0
    end
  end

  # Issue 30 (12, 13): an Nx user's project, depending on callbox and nx by
  # path (nx is a stub here: Hex is unreachable), gets Callbox.Nx from a
  # plain `mix compile` (Mix compiles the two in either order), and the
  # NIF is built into that project's _build, not into the callback
  # checkout.
  @tag timeout: 300_000
  test "a project depending on callbox and nx: Callbox.Nx after a plain mix compile, nothing written into the checkout" do
    root = TestGuests.root()
    elixir_dir = Path.join(root, "elixir")
    tmp = Path.join(System.tmp_dir!(), "callbox-elixir-dep-#{System.unique_integer([:positive])}")
    on_exit(fn -> File.rm_rf!(tmp) end)
    File.mkdir_p!(Path.join(tmp, "nx/lib"))
    File.mkdir_p!(Path.join(tmp, "app/lib"))

    File.write!(Path.join(tmp, "nx/mix.exs"), """
    defmodule Nx.MixProject do
      use Mix.Project
      def project, do: [app: :nx, version: "0.7.0", deps: []]
    end
    """)

    File.write!(Path.join(tmp, "nx/lib/nx.ex"), """
    defmodule Nx.Tensor do
      defstruct [:data, :type, :shape, vectorized_axes: []]
    end

    defmodule Nx do
      def to_binary(%Nx.Tensor{data: d}), do: d
      def from_binary(d, type), do: %Nx.Tensor{data: d, type: type, shape: {div(byte_size(d), div(elem(type, 1), 8))}}
      def reshape(%Nx.Tensor{} = t, shape), do: %{t | shape: shape}
      def type(%Nx.Tensor{type: t}), do: t
      def shape(%Nx.Tensor{shape: s}), do: s
    end
    """)

    File.write!(Path.join(tmp, "app/mix.exs"), """
    defmodule App.MixProject do
      use Mix.Project
      def project, do: [app: :app, version: "0.1.0", deps: [{:callbox, path: #{inspect(elixir_dir)}}, {:nx, path: "../nx"}]]
    end
    """)

    File.write!(Path.join(tmp, "app/lib/app.ex"), "defmodule App do\nend\n")
    before = File.ls!(elixir_dir) |> Enum.sort()
    env = [{"MIX_ENV", "dev"}, {"CALLBOX_CONFIG", nil}]
    app = Path.join(tmp, "app")
    {log, status} = System.cmd("mix", ["compile"], cd: app, env: env, stderr_to_stdout: true)
    assert status == 0, log

    script = """
    t = %Nx.Tensor{data: <<1.0::float-32-native, 2.5::float-32-native>>, type: {:f, 32}, shape: {2}}
    {:ok, host} = Callbox.open(#{inspect(TestGuests.config_path())})
    {:ok, [y]} = Callbox.Nx.call(host, "copy_f32", [t])
    IO.puts("nx=" <> inspect({Code.ensure_loaded?(Callbox.Nx), y.__struct__, y.data == t.data}))
    """

    {out, status} = System.cmd("mix", ["run", "--no-compile", "-e", script], cd: app, env: env, stderr_to_stdout: true)
    assert status == 0, out
    assert out =~ "nx={true, Nx.Tensor, true}", out
    assert File.regular?(Path.join(app, "_build/dev/lib/callbox/priv/callbox_nif.so"))
    assert File.ls!(elixir_dir) |> Enum.sort() == before, "the dependency build wrote into #{elixir_dir}"
    refute File.exists?(Path.join(elixir_dir, "priv"))
  end

  # The callbox CLI: CALLBOX_CLI, else the repository's bin/callbox (`make
  # elixir-test` builds it), else built here with go.
  defp callbox_cli(root, tmp) do
    cond do
      (cli = System.get_env("CALLBOX_CLI")) && cli != "" ->
        cli

      File.regular?(Path.join(root, "bin/callbox")) ->
        Path.join(root, "bin/callbox")

      go = System.find_executable("go") ->
        out = Path.join(tmp, "callbox")
        {log, 0} = System.cmd(go, ["build", "-o", out, "./cmd/callbox"], cd: root, stderr_to_stdout: true)
        _ = log
        out

      true ->
        flunk("no callbox CLI: run `make elixir-test` (it builds bin/callbox), or set CALLBOX_CLI")
    end
  end

  # .npy v1.0 of little-endian f32 (this machine's order: x86-64/arm64 Linux).
  defp npy(data, shape) do
    dims = shape |> Tuple.to_list() |> Enum.map_join(fn d -> "#{d}, " end)
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (#{dims}), }"
    pad = 64 - rem(10 + byte_size(header) + 1, 64)
    header = header <> String.duplicate(" ", rem(pad, 64)) <> "\n"
    <<0x93, "NUMPY", 1, 0, byte_size(header)::little-16>> <> header <> data
  end

  defp read_npy(<<0x93, "NUMPY", major, _minor, rest::binary>>) do
    {len, rest} =
      if major == 1,
        do: (<<l::little-16, r::binary>> = rest) && {l, r},
        else: (<<l::little-32, r::binary>> = rest) && {l, r}

    <<header::binary-size(len), data::binary>> = rest
    [dims] = Regex.run(~r/'shape': \(([^)]*)\)/, header, capture: :all_but_first)
    assert header =~ "'descr': '<f4'"

    shape =
      dims
      |> String.split(",", trim: true)
      |> Enum.map(&String.trim/1)
      |> Enum.reject(&(&1 == ""))
      |> Enum.map(&String.to_integer/1)

    {List.to_tuple(shape), data}
  end
end

defmodule Callbox.ReadmeExampleTest do
  # elixir/README.md's runnable example, run as the README says: `elixir
  # example.exs` in a directory outside the repository, CALLBOX naming the
  # checkout, Mix.install with a path dependency (no network, no Hex).
  use ExUnit.Case, async: true

  @tag timeout: 300_000
  test "the README's example runs and prints what it says" do
    root = Callbox.TestGuests.root()
    readme = File.read!(Path.join(root, "elixir/README.md"))
    [example] = Regex.run(~r/```elixir\n(Mix\.install.*?)```/s, readme, capture: :all_but_first)
    tmp = Path.join(System.tmp_dir!(), "callbox-elixir-readme-#{System.unique_integer([:positive])}")
    File.mkdir_p!(tmp)
    on_exit(fn -> File.rm_rf!(tmp) end)
    File.write!(Path.join(tmp, "example.exs"), example)

    env = [
      {"CALLBOX", root},
      {"MIX_INSTALL_DIR", Path.join(tmp, "installs")},
      {"HEX_OFFLINE", "1"},
      {"MIX_ENV", nil},
      {"CALLBOX_LIB", nil}
    ]

    {out, status} = System.cmd("elixir", ["example.exs"], cd: tmp, env: env, stderr_to_stdout: true)
    assert status == 0, out
    assert out =~ "[2.5, -5.0, 8.75, 0.0]"
    assert out =~ ~s(Timeout: callback "spin" failed: timeout after 100ms)
    assert out =~ ~r/scale \(x: f32\[n\], factor: f32\[\]\) -> f32\[n\] cb1-[0-9a-f]{64}/
  end
end

defmodule Callbox.MainReadmeExampleTest do
  # README.md's Elixir example ("Elixir and Nx"), run as written by
  # `elixir` from the repository root (its config path is relative to it),
  # with the compiled package on the code path: its pattern matches are
  # its assertions.
  use ExUnit.Case, async: true

  @tag timeout: 120_000
  test "README.md's Elixir example runs as written" do
    root = Callbox.TestGuests.root()
    readme = File.read!(Path.join(root, "README.md"))
    [_, section] = String.split(readme, "\n## Elixir and Nx\n", parts: 2)
    [section | _] = String.split(section, "\n## ", parts: 2)
    [example] = Regex.run(~r/```elixir\n(.*?)```/s, section, capture: :all_but_first)
    ebin = :code.lib_dir(:callbox, :ebin) |> List.to_string()
    script = example <> "\nIO.puts(\"readme example ok\")\n"

    {out, status} = System.cmd("elixir", ["-pa", ebin, "-e", script], cd: root, stderr_to_stdout: true)
    assert status == 0, out
    assert out =~ "readme example ok"
  end
end

defmodule Callbox.LibraryLookupTest do
  # Where the NIF looks for libcallbox: CALLBOX_LIB first; a path that is
  # not there makes every call an error naming it (the VM keeps running).
  use ExUnit.Case, async: true

  test "CALLBOX_LIB naming a missing library: calls fail with :failed_precondition saying where it looked" do
    ebin = :code.lib_dir(:callbox, :ebin) |> List.to_string()

    script = """
    {:error, e} = Callbox.open("callbox.yaml")
    IO.puts(inspect({e.kind, e.code}) <> " " <> e.message)
    """

    {out, 0} =
      System.cmd("elixir", ["-pa", ebin, "-e", script],
        env: [{"CALLBOX_LIB", "/nonexistent/libcallbox.so"}],
        stderr_to_stdout: true
      )

    assert out =~ "{:failed_precondition, :failed_precondition}"
    assert out =~ "libcallbox.so not found (tried /nonexistent/libcallbox.so)"
  end
end
