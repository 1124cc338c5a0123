// The Code Mode prelude, a module compiled once per process and loaded as bytecode in every
// run. Before the program, the host calls `install` with its three functions and the names of
// the tools the program may call; it defines `tools`, `ToolCallError` and `console`, and
// returns the function the host settles nested calls with and the engine's own getter of an
// Error's stack (which reads the stack the engine recorded and runs nothing else).
//
// The program may replace any global or prototype method (`JSON.stringify`, `Promise.resolve`,
// `Array.prototype.map`…). So everything the prelude uses later is taken here, before the
// program runs, and called directly, never looked up as a method; what the host reads of the
// program (its returned value, what it threw) the host reads itself, through the engine.
export function install(hostCall, hostTicket, hostLog, toolNames) {
  const { create, defineProperty, freeze } = Object;
  const PromiseOf = Promise;
  const StringOf = String;
  const stringify = JSON.stringify;
  const stackDescriptor = Object.getOwnPropertyDescriptor(Error.prototype, "stack");
  const errorStack = stackDescriptor === undefined ? undefined : stackDescriptor.get;

  // A data property, defined as an assignment would make it, whatever setters or descriptor
  // fields the program put on the prototypes.
  const own = (object, key, value) =>
    defineProperty(object, key, { __proto__: null, value, writable: true, enumerable: true, configurable: true });

  class ToolCallError extends Error {
    constructor(detail) {
      super(StringOf(detail.message));
      own(this, "name", "ToolCallError");
      own(this, "toolName", detail.toolName);
      own(this, "code", detail.code);
    }
  }
  globalThis.ToolCallError = ToolCallError;

  // The promises of calls still running, by call number.
  const pending = create(null);
  // `detail` is the call's value, or the fields of its ToolCallError.
  const settle = (id, ok, detail) => {
    const waiter = pending[id];
    if (waiter === undefined) return;
    delete pending[id];
    if (ok) waiter.resolve(detail);
    else waiter.reject(new ToolCallError(detail));
  };

  // Handed back by the host when the call did not succeed at once; no value is this object.
  const PENDING = freeze(create(null));
  // The promise of a call that did not succeed at once, after the host said what became of it.
  const waiting = (name) => {
    const ticket = hostTicket();
    if (typeof ticket === "string") {
      const error = new ToolCallError({
        toolName: name,
        code: "INVALID_ARGS",
        message: "the arguments are not JSON: " + ticket,
      });
      return new PromiseOf((resolve, reject) => reject(error));
    }
    // Ticket 0: the nested-call limit is reached and the run is ending; the promise never settles.
    return new PromiseOf((resolve, reject) => {
      if (ticket > 0) pending[ticket] = { __proto__: null, resolve, reject };
    });
  };

  // The host knows the tools by their place in the list.
  const tools = create(null);
  for (let index = 0; index < toolNames.length; index++) {
    const name = toolNames[index];
    tools[name] = (args) => {
      const value = hostCall(index, args === undefined ? {} : args, PENDING);
      return value !== PENDING ? new PromiseOf((resolve) => resolve(value)) : waiting(name);
    };
  }
  globalThis.tools = freeze(tools);

  // A logged value as text; the program's own getters and `toJSON` run here, as in any log.
  const show = (value) => {
    if (typeof value === "string") return value;
    try {
      const text = stringify(value);
      if (typeof text === "string") return text;
    } catch (error) {
      // Fall through to the plain conversion.
    }
    try {
      return StringOf(value);
    } catch (error) {
      return "(unprintable)";
    }
  };
  const write = (...values) => {
    let line = "";
    for (let index = 0; index < values.length; index++) {
      if (index > 0) line += " ";
      line += show(values[index]);
    }
    hostLog(line);
  };
  globalThis.console = freeze({
    log: write,
    info: write,
    warn: write,
    error: write,
    debug: write,
  });

  return { settle, errorStack };
}
