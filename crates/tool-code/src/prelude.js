// The Code Mode prelude: evaluated once per run, before the program. It takes the two host
// functions off the global object, defines `tools`, `ToolCallError` and `console`, and returns
// the functions the host drives the run with. `__DSH_TOOL_NAMES__` is replaced by a JSON array.
(() => {
  const hostCall = globalThis.__dsh_call;
  const hostLog = globalThis.__dsh_log;
  delete globalThis.__dsh_call;
  delete globalThis.__dsh_log;

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
  const settle = (id, ok, payload) => {
    const waiter = pending.get(id);
    if (waiter === undefined) return;
    pending.delete(id);
    const detail = JSON.parse(payload);
    if (ok) waiter.resolve(detail);
    else waiter.reject(new ToolCallError(detail));
  };

  const invoke = (name, args) => {
    let text;
    try {
      text = JSON.stringify(args === undefined ? {} : args);
    } catch (error) {
      text = undefined;
    }
    if (typeof text !== "string") {
      return Promise.reject(
        new ToolCallError({
          toolName: name,
          code: "INVALID_ARGS",
          message: "the arguments are not JSON",
        }),
      );
    }
    const started = hostCall(name, text);
    // A string: the call succeeded at once and this is its value's JSON.
    if (typeof started === "string") return Promise.resolve(JSON.parse(started));
    // Id 0: the nested-call limit is reached and the run is ending; the promise never settles.
    return new Promise((resolve, reject) => {
      if (started > 0) pending.set(started, { resolve, reject });
    });
  };

  const tools = Object.create(null);
  for (const name of __DSH_TOOL_NAMES__) {
    tools[name] = (args) => invoke(name, args);
  }
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
})()
