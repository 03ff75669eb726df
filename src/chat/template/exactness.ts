// Decides once per chat template whether rendering with placeholders for client strings is exact on its own, so a
// plain conversation is rendered once instead of twice (the second render only checked the placeholder one).
//
// The placeholder render is exact when the template treats every client string as opaque: it outputs it,
// concatenates it, trims it, tests its truthiness or type, and nothing else. Placeholders keep all of these (they
// keep edge whitespace outside and leave empty strings empty, see render.ts), so substituting the strings back
// gives byte for byte the real render. Anything that looks inside a client string (comparison, `in`, length,
// slicing, split, replace, tojson, upper…) or hands it to a call, a literal or a filter makes the answer "not
// proven", and the caller keeps the checked path. The check is conservative: false is always safe.
//
// Scope: conversations without tools and without tool calls (their values are nested objects that templates
// serialise, so those requests always take the checked path); the template's `tools` is then undefined.

/** What a value may hold of the client's, as far as the template can see it. */
type Kind = "client" | "message" | "messages";
type Kinds = ReadonlySet<Kind>;

const NONE: Kinds = new Set();
const CLIENT: Kinds = new Set(["client"]);
const MESSAGE: Kinds = new Set(["message"]);
const MESSAGES: Kinds = new Set(["messages"]);

/** Message fields holding client text; every other field is the role, or absent in such a conversation. */
const CLIENT_FIELDS = new Set(["content", "name", "tool_call_id"]);
/** Tests whose answer depends only on a value's type or presence, which placeholders keep. */
const TYPE_TESTS = new Set([
  "defined",
  "undefined",
  "none",
  "string",
  "number",
  "integer",
  "float",
  "boolean",
  "mapping",
  "iterable",
  "sequence",
  "callable",
]);
/** Filters and methods that keep a client string opaque: identity, or trimming (placeholders keep edge whitespace). */
const OPAQUE_STRING_FILTERS = new Set(["trim", "string", "safe"]);
const OPAQUE_STRING_METHODS = new Set(["strip", "lstrip", "rstrip"]);

/** A parsed template node (the library's AST classes are internal; nodes are read by their `type`). */
type Node = { type: string } & Record<string, unknown>;

class NotProven extends Error {}

/** True when placeholders render this parsed template exactly for conversations without tools or tool calls. */
export function placeholdersAreExact(program: unknown): boolean {
  const analysis = new Analysis();
  try {
    // Variables set later in a loop are read earlier in the next turn: walk until their kinds stop growing.
    for (let pass = 0; pass < 8; pass++) {
      analysis.changed = false;
      analysis.statements(bodyOf(program));
      if (!analysis.changed) return true;
    }
    return false;
  } catch (error) {
    if (error instanceof NotProven) return false;
    throw error;
  }
}

class Analysis {
  /** Kinds each variable name was ever given (flow-insensitive: any binding anywhere counts everywhere). */
  private readonly variables = new Map<string, Set<Kind>>([["messages", new Set(MESSAGES)]]);
  /** Kinds of the items of the loops we are inside, innermost last (`loop.previtem`). */
  private readonly loops: Kinds[] = [];
  /** Inside a `{% filter %}` block: its output is transformed. */
  private noClientOutput = 0;
  changed = false;

  statements(nodes: readonly Node[]): void {
    for (const node of nodes) this.statement(node);
  }

  private statement(node: Node): void {
    switch (node.type) {
      case "Comment":
      case "Break":
      case "Continue":
        return;
      case "If":
        this.expression(child(node, "test"));
        this.statements(list(node, "body"));
        this.statements(list(node, "alternate"));
        return;
      case "For":
        this.forLoop(node);
        return;
      case "Set":
        this.set(node);
        return;
      case "Macro":
        // Only kind-free values can be passed to a call (see `call`), so parameters are plain values. A macro's
        // output is a call's value, which the caller may transform: it may not output client text.
        this.withoutClientOutput(() => this.statements(list(node, "body")));
        return;
      case "CallStatement":
        // The body is the macro's caller(), whose output the macro may transform.
        this.call(child(node, "call"));
        this.withoutClientOutput(() => this.statements(list(node, "body")));
        return;
      case "FilterStatement":
        // A filter over a block transforms whatever the block outputs: nothing of the client's may be in it.
        this.filterArguments(child(node, "filter"));
        this.withoutClientOutput(() => this.statements(list(node, "body")));
        return;
      default: {
        // An expression statement is output: client strings may be output as they are, nothing else of theirs.
        const kinds = this.expression(node);
        if (kinds.has("message") || kinds.has("messages")) throw new NotProven();
        if (this.noClientOutput > 0 && kinds.has("client")) throw new NotProven();
      }
    }
  }

  private withoutClientOutput(run: () => void): void {
    this.noClientOutput++;
    try {
      run();
    } finally {
      this.noClientOutput--;
    }
  }

  private forLoop(node: Node): void {
    const iterable = this.expression(child(node, "iterable"));
    if (iterable.has("client") || iterable.has("message")) throw new NotProven(); // characters or key-value pairs
    const item: Kinds = iterable.has("messages") ? MESSAGE : NONE;
    const loopvar = child(node, "loopvar");
    if (loopvar.type === "Identifier") this.bind(String(loopvar.value), item);
    else if (item.size > 0) throw new NotProven();
    this.loops.push(item);
    try {
      this.statements(list(node, "body"));
    } finally {
      this.loops.pop();
    }
    this.statements(list(node, "defaultBlock"));
  }

  private set(node: Node): void {
    const assignee = child(node, "assignee");
    const value = node.value;
    let kinds: Kinds;
    if (value === null || value === undefined) {
      // {% set x %}…{% endset %}: x holds the block's output.
      this.statements(list(node, "body"));
      kinds = CLIENT;
    } else {
      kinds = this.expression(value as Node);
    }
    if (assignee.type === "Identifier") this.bind(String(assignee.value), kinds);
    else if (kinds.size > 0) throw new NotProven(); // into a namespace attribute or a tuple: not followed
  }

  private bind(name: string, kinds: Kinds): void {
    const known = this.variables.get(name) ?? new Set<Kind>();
    for (const kind of kinds) {
      if (!known.has(kind)) {
        known.add(kind);
        this.changed = true;
      }
    }
    this.variables.set(name, known);
  }

  /** The kinds an expression's value may have; throws NotProven when it would look inside client text. */
  private expression(node: Node): Kinds {
    switch (node.type) {
      case "StringLiteral":
      case "IntegerLiteral":
      case "FloatLiteral":
        return NONE;
      case "ArrayLiteral":
      case "TupleLiteral":
        for (const item of node.value as Node[]) this.plain(item);
        return NONE;
      case "ObjectLiteral":
        for (const [key, item] of node.value as Map<Node, Node>) {
          this.plain(key);
          this.plain(item);
        }
        return NONE;
      case "Identifier":
        return this.variables.get(String(node.value)) ?? NONE;
      case "MemberExpression":
        return this.member(node);
      case "CallExpression":
        return this.call(node);
      case "BinaryExpression":
        return this.binary(node);
      case "UnaryExpression":
        // `not x` is truthiness; arithmetic negation of client text is refused.
        if (operator(node) === "not") {
          this.expression(child(node, "argument"));
          return NONE;
        }
        this.plain(child(node, "argument"));
        return NONE;
      case "FilterExpression":
        return this.filter(node);
      case "TestExpression": {
        const test = String(child(node, "test").value);
        const operand = this.expression(child(node, "operand"));
        if (operand.size > 0 && !TYPE_TESTS.has(test)) throw new NotProven();
        return NONE;
      }
      case "Ternary":
        this.expression(child(node, "condition"));
        return union(this.expression(child(node, "trueExpr")), this.expression(child(node, "falseExpr")));
      case "SelectExpression":
        this.expression(child(node, "test"));
        return this.expression(child(node, "lhs"));
      case "SliceExpression":
        for (const key of ["start", "stop", "step"]) {
          const bound = node[key] as Node | undefined;
          if (bound !== undefined) this.plain(bound);
        }
        return NONE;
      case "KeywordArgumentExpression":
        this.plain(child(node, "value"));
        return NONE;
      default:
        // Spreads and anything newer: only without anything of the client's.
        for (const value of Object.values(node)) {
          if (isNode(value)) this.plain(value);
        }
        return NONE;
    }
  }

  /** An expression whose value must hold nothing of the client's (an argument, an index, a literal's item). */
  private plain(node: Node): void {
    if (this.expression(node).size > 0) throw new NotProven();
  }

  private member(node: Node): Kinds {
    const object = this.expression(child(node, "object"));
    const property = child(node, "property");
    const computed = node.computed === true;
    if (object.size === 0) {
      if (computed) this.plain(property);
      // loop.previtem / loop.nextitem are items of the innermost loop.
      if (
        isIdentifier(child(node, "object"), "loop") &&
        !computed &&
        /^(previtem|nextitem)$/.test(identifier(property))
      ) {
        return this.loops.at(-1) ?? NONE;
      }
      return NONE;
    }
    if (object.has("client")) throw new NotProven(); // a character, or a string method
    let kinds: Kinds = NONE;
    if (object.has("messages")) {
      if (!computed) throw new NotProven(); // a list method
      if (property.type === "SliceExpression") {
        this.expression(property);
        kinds = union(kinds, MESSAGES);
      } else {
        this.plain(property);
        kinds = union(kinds, MESSAGE);
      }
    }
    if (object.has("message")) {
      const field = computed ? stringLiteral(property) : identifier(property);
      if (field === undefined) throw new NotProven();
      kinds = union(kinds, CLIENT_FIELDS.has(field) ? CLIENT : NONE);
    }
    return kinds;
  }

  private call(node: Node): Kinds {
    const callee = child(node, "callee");
    const args = list(node, "args");
    if (callee.type === "MemberExpression" && callee.computed !== true) {
      const object = this.expression(child(callee, "object"));
      const method = identifier(child(callee, "property"));
      if (object.size > 0) {
        for (const arg of args) this.plain(arg);
        if (
          object.has("client") &&
          object.size === 1 &&
          OPAQUE_STRING_METHODS.has(method) &&
          args.length === 0
        ) {
          return CLIENT;
        }
        // message.get('content'): the field, as a member access would give it.
        if (object.has("message") && object.size === 1 && method === "get") {
          const field = args[0] === undefined ? undefined : stringLiteral(args[0]);
          if (field === undefined) throw new NotProven();
          return CLIENT_FIELDS.has(field) ? CLIENT : NONE;
        }
        throw new NotProven();
      }
    } else {
      this.plain(callee);
    }
    for (const arg of args) this.plain(arg);
    return NONE;
  }

  private binary(node: Node): Kinds {
    const op = operator(node);
    const left = this.expression(child(node, "left"));
    const right = this.expression(child(node, "right"));
    switch (op) {
      case "and":
      case "or":
        return union(left, right); // truthiness, then one of the operands
      case "+":
      case "~": {
        const both = union(left, right);
        // Concatenating client text is opaque; lists of messages may be joined too.
        if (both.has("message") || (both.has("messages") && both.has("client"))) throw new NotProven();
        return both;
      }
      case "in":
      case "not in":
        // A key of a message ('content' in message) is structure; anything else compares client values.
        if (left.size > 0 || right.has("client") || right.has("messages")) throw new NotProven();
        return NONE;
      default:
        if (left.size > 0 || right.size > 0) throw new NotProven();
        return NONE;
    }
  }

  private filter(node: Node): Kinds {
    const operand = this.expression(child(node, "operand"));
    const filter = child(node, "filter");
    const name = filter.type === "CallExpression" ? identifier(child(filter, "callee")) : identifier(filter);
    const hasArgs = filter.type === "CallExpression" && list(filter, "args").length > 0;
    this.filterArguments(filter);
    if (operand.size === 0) return NONE;
    if (operand.has("message")) throw new NotProven();
    let kinds: Kinds = NONE;
    if (operand.has("client")) {
      if (!OPAQUE_STRING_FILTERS.has(name) || hasArgs) throw new NotProven();
      kinds = union(kinds, CLIENT);
    }
    if (operand.has("messages")) {
      if (name === "length" || name === "count") kinds = union(kinds, NONE);
      else if (name === "first" || name === "last") kinds = union(kinds, MESSAGE);
      else if (name === "reverse" || name === "list") kinds = union(kinds, MESSAGES);
      else throw new NotProven();
      if (hasArgs) throw new NotProven();
    }
    return kinds;
  }

  private filterArguments(filter: Node): void {
    if (filter.type === "CallExpression") for (const arg of list(filter, "args")) this.plain(arg);
  }
}

function union(a: Kinds, b: Kinds): Kinds {
  if (b.size === 0) return a;
  if (a.size === 0) return b;
  return new Set([...a, ...b]);
}

function isNode(value: unknown): value is Node {
  return (
    typeof value === "object" && value !== null && typeof (value as { type?: unknown }).type === "string"
  );
}

function child(node: Node, key: string): Node {
  const value = node[key];
  if (!isNode(value)) throw new NotProven(); // a shape this analysis does not know
  return value;
}

function list(node: Node, key: string): Node[] {
  const value = node[key];
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || !value.every(isNode)) throw new NotProven();
  return value;
}

function bodyOf(program: unknown): Node[] {
  if (!isNode(program) || program.type !== "Program") throw new NotProven();
  return list(program, "body");
}

function operator(node: Node): string {
  const token = node.operator as { value?: unknown } | undefined;
  return String(token?.value ?? "");
}

function identifier(node: Node): string {
  return node.type === "Identifier" ? String(node.value) : "";
}

function isIdentifier(node: Node, name: string): boolean {
  return node.type === "Identifier" && node.value === name;
}

function stringLiteral(node: Node): string | undefined {
  return node.type === "StringLiteral" ? String(node.value) : undefined;
}
