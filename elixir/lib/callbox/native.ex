defmodule Callbox.Native do
  @moduledoc false
  # The NIF (c_src/, its table in callbox_nif.c). Loading it also loads libcallbox, found
  # in this order: the CALLBOX_LIB environment variable, libcallbox.so in
  # the priv directory, the callbox repository's build/ (where `make lib`
  # puts it; the path is recorded when this module is compiled). When none
  # loads, every host function returns {:error, %Callbox.Error{kind:
  # :failed_precondition}} saying why, and Callbox.Native.problem/0 says it.

  @on_load :load
  # Where the NIF was built (the build's priv: mix.exs), for a code path
  # that does not say (:code.priv_dir/1 finds the priv beside the ebin the
  # module was loaded from).
  @compiled_priv Path.join(Mix.Project.app_path(), "priv")
  @repo_build Path.expand("../../../build", __DIR__)

  def load do
    case :erlang.load_nif(String.to_charlist(Path.join(priv_dir(), "callbox_nif")), 0) do
      :ok ->
        case find_library() do
          {:ok, path} -> init(path)
          {:error, why} -> init({:error, why})
        end

        :ok

      {:error, {reason, text}} ->
        :logger.error(~c"callbox: cannot load its NIF (~p): ~s", [reason, text])
        {:error, reason}
    end
  end

  @doc false
  def priv_dir do
    case :code.priv_dir(:callbox) do
      dir when is_list(dir) ->
        dir = List.to_string(dir)
        if File.exists?(Path.join(dir, "callbox_nif.so")), do: dir, else: @compiled_priv

      _ ->
        @compiled_priv
    end
  end

  @doc "Where libcallbox is looked for, in order."
  def library_candidates do
    case System.get_env("CALLBOX_LIB") do
      path when is_binary(path) and path != "" -> [path]
      _ -> [Path.join(priv_dir(), "libcallbox.so"), Path.join(@repo_build, "libcallbox.so")]
    end
  end

  def find_library do
    candidates = library_candidates()

    case Enum.find(candidates, &File.regular?/1) do
      nil ->
        {:error,
         "libcallbox.so not found (tried #{Enum.join(candidates, ", ")}): in the callbox repository " <>
           "`make lib` builds build/libcallbox.so; or copy it into #{priv_dir()}, or set CALLBOX_LIB to its path"}

      path ->
        {:ok, path}
    end
  end

  defp nif!, do: :erlang.nif_error(:callbox_nif_not_loaded)

  # init(path | {:error, why}): dlopen libcallbox (once per VM).
  def init(_path_or_problem), do: nif!()
  def version, do: nif!()
  def dtypes, do: nif!()
  def open(_path), do: nif!()
  def open_config(_text, _format, _base_dir), do: nif!()
  def close(_host), do: nif!()
  def callbacks(_host), do: nif!()
  def callback(_host, _name), do: nif!()
  def output_types(_host, _callback, _types), do: nif!()
  # call(...): on the caller's scheduler within inline_ns, else :continue
  # (then call_async/8 runs it on a library thread).
  def call(_host, _chain, _callback, _inputs, _token, _guard, _inline_ns), do: nif!()
  def call_stats, do: nif!()
  def call_many(_host, _chain, _callback, _input_lists, _token, _guard), do: nif!()
  # call_async(...): the reply ({:ok, outs} | {:error, e}: refused, or over
  # within the poll), or :ok, and then {ref, reply} arrives.
  def call_async(_host, _chain, _callback, _inputs, _token, _guard, _ref, _budget_ns), do: nif!()
  def async_stats, do: nif!()
  def set_async_spin(_ns), do: nif!()
  def bench_capi(_host, _callback, _inputs, _iterations), do: nif!()
  def bench_handoff(_iterations), do: nif!()
  def new_guard, do: nif!()
  def tap(_host, _chain, _callback, _inputs), do: nif!()
  def barrier(_host, _chain), do: nif!()
  def chain_reset(_host, _chain), do: nif!()
  def set_default_host(_host), do: nif!()
  def cancel_token, do: nif!()
  def cancel(_token), do: nif!()
  def closer_stats, do: nif!()
  def set_guards(_on), do: nif!()
  def set_log_process(_pid, _level), do: nif!()
end
