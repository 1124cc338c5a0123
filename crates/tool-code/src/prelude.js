// The Code Mode prelude, a module compiled once per process and loaded as bytecode in every
// run. Before the program, the host calls `install` with its three functions and the names of
// the tools the program may call; it defines `tools`, `ToolCallError` and `console`, and
// returns the functions the host drives the run with.
export function install(hostCall, hostTicket, hostLog, toolNames) {

  class ToolCallError extends Error {
    constructor(detail) {
      super(String(detail.message));
      this.name = "ToolCallError";
      this.toolName = detail.toolName;
      this.code = detail.code;
    }
  }
  globalThis.ToolCallError = ToolCallError;

  const pending = new Map();
  // `detail` is the call's value, or the fields of its ToolCallError.
  const settle = (id, ok, detail) => {
    const waiter = pending.get(id);
    if (waiter === undefined) return;
    pending.delete(id);
    if (ok) waiter.resolve(detail);
    else waiter.reject(new ToolCallError(detail));
  };

  // Handed back by the host when the call did not succeed at once; no value is this object.
  const PENDING = Object.freeze({});
  // The promise of a call that did not succeed at once, after the host said what became of it.
  const waiting = (name) => {
    const ticket = hostTicket();
    if (typeof ticket === "string") {
      return Promise.reject(
        new ToolCallError({
          toolName: name,
          code: "INVALID_ARGS",
          message: "the arguments are not JSON: " + ticket,
        }),
      );
    }
    // Ticket 0: the nested-call limit is reached and the run is ending; the promise never settles.
    return new Promise((resolve, reject) => {
      if (ticket > 0) pending.set(ticket, { resolve, reject });
    });
  };

  // The host knows the tools by their place in the list.
  const tools = Object.create(null);
  toolNames.forEach((name, index) => {
    tools[name] = (args) => {
      const value = hostCall(index, args === undefined ? {} : args, PENDING);
      return value !== PENDING ? Promise.resolve(value) : waiting(name);
    };
  });
  globalThis.tools = Object.freeze(tools);

  const show = (value) => {
    if (typeof value === "string") return value;
    try {
      const text = JSON.stringify(value);
      if (typeof text === "string") return text;
    } catch (error) {
      // Fall through to the plain conversion.
    }
    return String(value);
  };
  const write = (...values) => hostLog(values.map(show).join(" "));
  globalThis.console = Object.freeze({
    log: write,
    info: write,
    warn: write,
    error: write,
    debug: write,
  });

  const describe = (error) => {
    if (error instanceof Error) {
      const out = {
        kind: "exception",
        name: String(error.name),
        message: String(error.message),
        stack: typeof error.stack === "string" ? error.stack : null,
      };
      if (error instanceof ToolCallError) {
        out.toolName = error.toolName;
        out.code = error.code;
      }
      return out;
    }
    return {
      kind: "exception",
      name: null,
      message: "the program threw a value that is not an Error: " + show(error),
      stack: null,
    };
  };

  // The returned value must be JSON: JSON.stringify would silently drop functions or turn
  // them into null, so they are looked for first.
  const notJson = (what, path) => ({
    kind: "not_json",
    message: "the program returned " + what + " at " + path + ", which is not JSON",
  });
  const findNonJson = (value, path, seen) => {
    switch (typeof value) {
      case "function":
        return notJson("a function", path);
      case "symbol":
        return notJson("a symbol", path);
      case "bigint":
        return notJson("a BigInt", path);
      case "object": {
        if (value === null) return null;
        if (seen.has(value)) return notJson("a cycle", path);
        if (value instanceof Map || value instanceof Set || value instanceof Promise) {
          return notJson("a " + value.constructor.name, path);
        }
        seen.add(value);
        for (const key of Object.keys(value)) {
          const found = findNonJson(value[key], path + "." + key, seen);
          if (found !== null) return found;
        }
        seen.delete(value);
        return null;
      }
      default:
        return null;
    }
  };

  const watch = (promise) => {
    let outcome;
    promise.then(
      (value) => {
        const found = findNonJson(value, "$", new Set());
        if (found !== null) {
          outcome = JSON.stringify(found);
          return;
        }
        try {
          const text = JSON.stringify(value === undefined ? null : value);
          outcome = JSON.stringify({ kind: "value", text });
        } catch (error) {
          outcome = JSON.stringify(notJson("a value JSON cannot encode (" + show(error.message) + ")", "$"));
        }
      },
      (error) => {
        outcome = JSON.stringify(describe(error));
      },
    );
    return () => outcome;
  };

  return { settle, watch };
}
