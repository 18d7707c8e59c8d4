# The Elixir binding of libcallbox: a NIF over the C API (../ffi/include/callbox.h).
# No Hex dependencies: the NIF is built by the compiler below (gcc against
# erl_nif.h and callbox.h), so `mix compile` and `mix test` work offline.

defmodule Mix.Tasks.Compile.CallboxNif do
  @shortdoc "Builds the NIF over libcallbox (callbox_nif.so) with cc"
  @moduledoc """
  Builds `callbox_nif.so` from every `c_src/*.c` (callbox_nif.c and the
  files by topic beside it, sharing the private `c_src/nif.h`) with `$CC`
  (default `cc`) against the running Erlang's `erl_nif.h` and libcallbox's
  header:
  `$CALLBOX_INCLUDE/callbox.h`, else the repository's `build/callbox.h` or
  `ffi/include/callbox.h`. libcallbox itself is not linked; the NIF loads it
  at run time (see `Callbox.Native`). Rebuilds only when a source (a `.c`
  or `.h` in `c_src/`, or callbox.h) is newer. With `-fvisibility=hidden`
  the NIF exports only `nif_init`: the functions its files share stay
  inside it.

  The NIF goes into the build's own `priv` (`_build/<env>/lib/callbox/priv`,
  what `:code.priv_dir(:callbox)` returns), never into the source tree: a
  project that depends on callbox by path, or `Mix.install`, writes nothing
  into the callbox checkout. (callbox ships no `priv/` of its own, so Mix
  makes the build's `priv` a directory rather than a link to the source's.)
  """
  use Mix.Task.Compiler

  @impl true
  def run(_args) do
    root = Path.expand(".", __DIR__)
    srcs = Path.wildcard(Path.join(root, "c_src/*.c"))
    headers = Path.wildcard(Path.join(root, "c_src/*.h"))
    priv = Path.join(Mix.Project.app_path(), "priv")

    # A checkout built before the NIF moved out of the source tree still has
    # a priv/ there, which Mix links the build's priv to: the NIF would be
    # written through the link into the source. Say so instead.
    if File.exists?(Path.join(root, "priv")) do
      Mix.raise(
        "#{Path.join(root, "priv")} exists: callbox builds its NIF into #{priv}, never into the source tree; " <>
          "remove the old priv/ (a build output of earlier versions) and compile again"
      )
    end

    # An earlier build's link to the source priv/ (now gone) is replaced by
    # a directory of the build's own.
    with {:ok, %File.Stat{type: :symlink}} <- File.lstat(priv), do: File.rm!(priv)

    out = Path.join(priv, "callbox_nif.so")
    header_dir = header_dir(root)
    header = Path.join(header_dir, "callbox.h")
    erts = Path.join([to_string(:code.root_dir()), "usr", "include"])

    if stale?(out, srcs ++ headers ++ [header]) do
      File.mkdir_p!(Path.dirname(out))
      cc = System.get_env("CC", "cc")

      args =
        ~w(-O2 -std=gnu11 -Wall -Wextra -fPIC -fvisibility=hidden -shared) ++
          ["-I", erts, "-I", header_dir, "-o", out] ++ srcs ++ ["-ldl"]

      Mix.shell().info("cc #{Path.relative_to_cwd(Path.join(root, "c_src"))}/*.c -> #{Path.relative_to_cwd(out)}")

      case System.cmd(cc, args, stderr_to_stdout: true) do
        {output, 0} ->
          if output != "", do: Mix.shell().info(output)
          {:ok, []}

        {output, status} ->
          Mix.shell().error(output)
          Mix.raise("#{cc} exited with status #{status} building #{out}")
      end
    else
      {:noop, []}
    end
  end

  defp header_dir(root) do
    candidates =
      [System.get_env("CALLBOX_INCLUDE"), Path.join(root, "../build"), Path.join(root, "../ffi/include")]
      |> Enum.reject(&is_nil/1)

    Enum.find(candidates, &File.regular?(Path.join(&1, "callbox.h"))) ||
      Mix.raise("callbox.h not found (tried #{Enum.join(candidates, ", ")}): set CALLBOX_INCLUDE to its directory")
  end

  defp stale?(out, sources) do
    case File.stat(out, time: :posix) do
      {:ok, %{mtime: t}} -> Enum.any?(sources, &(File.stat!(&1, time: :posix).mtime > t))
      _ -> true
    end
  end
end

defmodule Callbox.MixProject do
  use Mix.Project

  def project do
    [
      app: :callbox,
      version: "0.1.0",
      elixir: "~> 1.14",
      compilers: [:callbox_nif] ++ Mix.compilers(),
      start_permanent: Mix.env() == :prod,
      deps: [],
      docs: [main: "Callbox"]
    ]
  end

  def application do
    [extra_applications: []]
  end
end
