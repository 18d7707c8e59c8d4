defmodule Callbox.Error do
  @moduledoc """
  A failed (or refused) callbox call: libcallbox's `callbox_error` as an
  exception struct.

  Fields:

    * `:kind` - the failure kind as an atom (`CALLBOX_KIND_*`): `:timeout`,
      `:fuel_exhausted`, `:memory_limit`, `:stack_overflow`, `:unreachable`,
      `:memory_out_of_bounds`, `:divide_by_zero`, `:integer_overflow`,
      `:invalid_conversion`, `:table_out_of_bounds`,
      `:indirect_call_mismatch`, `:guest_error`, `:abi_violation`,
      `:host_panic`, `:canceled`, `:other_trap`, `:invalid_argument`,
      `:unknown_callback`, `:failed_precondition`, `:overloaded`, `:worker_died` (`:unknown` for a number
      this binding does not know, with the number in `:kind_number`)
    * `:kind_name` - the library's name of the kind (`"Timeout"`)
    * `:code` - the absl / XLA FFI error code as an atom, the absl name
      lowercased: `:deadline_exceeded`, `:resource_exhausted`,
      `:invalid_argument`, `:not_found`, `:failed_precondition`,
      `:cancelled`, `:internal`, ... (`:code_number` is the number)
    * `:callback` - the callback's name (`""` when no callback is concerned)
    * `:chain`, `:seq` - the chain and the step's sequence number (from 1;
      `""` and `0` outside a chain)
    * `:message` - the host's description (`"timeout after 50ms"`)
    * `:guest_message` - what the guest reported through `callbox.error`
    * `:guest_status` - the ABI status a guest returned (`:guest_error`)
    * `:failed` - for a chain step that did not run because an earlier step
      failed: `%{callback: ..., seq: ..., message: ...}` of the step that
      failed (`:kind` and `:guest_message` are that step's); else `nil`
    * `:frames` - for a failure inside the guest (a trap, an abort, a
      timeout, fuel, memory, stack): the guest's frames, innermost first, in
      the module as its author built it, each `%{func: ..., module: ...,
      file: ..., line: ..., column: ..., func_index: ..., offset: ...}`
      (`:text` ends in the innermost few); else `[]`
    * `:text` - the whole error as one line (also `Exception.message/1`)
  """

  @kinds %{
    1 => :timeout,
    2 => :fuel_exhausted,
    3 => :memory_limit,
    4 => :stack_overflow,
    5 => :unreachable,
    6 => :memory_out_of_bounds,
    7 => :divide_by_zero,
    8 => :integer_overflow,
    9 => :invalid_conversion,
    10 => :table_out_of_bounds,
    11 => :indirect_call_mismatch,
    12 => :guest_error,
    13 => :abi_violation,
    14 => :host_panic,
    15 => :canceled,
    16 => :other_trap,
    17 => :invalid_argument,
    18 => :unknown_callback,
    19 => :failed_precondition,
    20 => :overloaded,
    21 => :worker_died
  }

  @codes %{
    0 => :ok,
    1 => :cancelled,
    2 => :unknown,
    3 => :invalid_argument,
    4 => :deadline_exceeded,
    5 => :not_found,
    6 => :already_exists,
    7 => :permission_denied,
    8 => :resource_exhausted,
    9 => :failed_precondition,
    10 => :aborted,
    11 => :out_of_range,
    12 => :unimplemented,
    13 => :internal,
    14 => :unavailable,
    15 => :data_loss,
    16 => :unauthenticated
  }

  defexception kind: :unknown,
               kind_number: 0,
               kind_name: "",
               code: :unknown,
               code_number: 2,
               guest_status: 0,
               callback: "",
               chain: "",
               seq: 0,
               message: "",
               guest_message: "",
               failed: nil,
               frames: [],
               text: ""

  @impl true
  def message(%__MODULE__{text: text}), do: text

  @doc "The kind atoms by `CALLBOX_KIND_*` number."
  def kinds, do: @kinds

  @doc "The code atoms by absl code number."
  def codes, do: @codes

  @doc false
  def from_native(
        {kind, code, guest_status, seq, kind_name, callback, chain, message, guest_message, text, failed_callback,
         failed_seq, failed_message, frames}
      ) do
    %__MODULE__{
      kind: Map.get(@kinds, kind, :unknown),
      kind_number: kind,
      kind_name: kind_name,
      code: Map.get(@codes, code, :unknown),
      code_number: code,
      guest_status: guest_status,
      callback: callback,
      chain: chain,
      seq: seq,
      message: message,
      guest_message: guest_message,
      failed:
        if(failed_seq != 0, do: %{callback: failed_callback, seq: failed_seq, message: failed_message}, else: nil),
      frames:
        for {func, module, file, line, column, func_index, offset} <- frames do
          %{func: func, module: module, file: file, line: line, column: column, func_index: func_index, offset: offset}
        end,
      text: text
    }
  end

  @doc false
  def invalid_argument(callback, message) do
    %__MODULE__{
      kind: :invalid_argument,
      kind_number: 17,
      kind_name: "InvalidArgument",
      code: :invalid_argument,
      code_number: 3,
      callback: callback,
      message: message,
      text:
        if(callback != "",
          do: "InvalidArgument: callback \"#{callback}\": #{message}",
          else: "InvalidArgument: #{message}"
        )
    }
  end
end
