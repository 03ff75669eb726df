// Refuses recursive schemas whose grammar would keep ever more parses open as the output nests (llama.cpp's cost
// per token would double with every level).
import { Refusal } from "../../refusal.js";
import type { SchemaGraph, SchemaNode } from "./json-schema.js";

/**
 * A union inside a recursion whose options the output cannot tell apart before it recurses. llama.cpp keeps one
 * parse stack per live alternative; when two options of such a union both start alike and both lead back into the
 * union, every nesting level of the output doubles the stacks, so the cost of each generated token grows
 * exponentially with the depth (measured on llama.cpp's grammar: 4× per two levels, a second per 2,000 candidate
 * checks at depth 6). The schema's size does not show it: a few lines suffice. Refused as too complex (400).
 */
export class AmbiguousRecursionError extends Refusal {
  override name = "AmbiguousRecursionError";
  readonly fault = "client";
  constructor(
    /** A JSON pointer to the union (`#/$defs/node`). */
    readonly path: string,
    readonly options: readonly [number, number],
  ) {
    super(
      `The schema is too complex: options ${options[0]} and ${options[1]} of a union both lead back into it and ` +
        "can begin alike, so a parse could not decide between them before nesting deeper (the cost per " +
        "token would double with every level). Make the options distinguishable at their start, for example with " +
        "a different `const` value in a first, required property.",
    );
  }
}

/** How many characters of each option's start are compared, and how many starts are kept per node. */
const PREFIX_CHARS = 64;
const MAX_PREFIXES = 256;

// Prefixes are compact JSON texts (the grammar allows whitespace at the same places in every option, so comparing
// compact texts is enough). Two marks stand for classes: NUMBER_START for "-" or a digit, and ANY_REST for
// "anything may follow" (string contents, an unconstrained value, an expansion cut short).
const NUMBER_START = "\u0001";
const ANY_REST = "\u0002";

/** Throws AmbiguousRecursionError for the first union that could make parse stacks grow with the nesting depth. */
export function checkRecursionAmbiguity(graph: SchemaGraph): void {
  const edges = (node: SchemaNode): SchemaNode[] => {
    switch (node.kind) {
      case "array":
        return [node.items, ...(node.prefix ?? [])];
      case "object":
        return [
          ...node.properties.map((p) => p.schema),
          ...(node.additional === false ? [] : [node.additional]),
        ];
      case "anyOf":
        return [...node.options];
      case "ref": {
        const target = graph.defs.get(node.name);
        return target === undefined ? [] : [target];
      }
      default:
        return [];
    }
  };
  const component = stronglyConnected(graph.root, edges);
  const paths = firstPaths(graph);
  const starts = new PrefixFinder(graph);
  for (const [node, id] of component) {
    if (node.kind !== "anyOf") continue;
    // An option that can reach the union again is in its component (the union reaches each of its options).
    const recursive = node.options
      .map((option, index) => ({ option, index }))
      .filter(({ option }) => component.get(option) === id);
    for (let a = 0; a < recursive.length; a++) {
      for (let b = a + 1; b < recursive.length; b++) {
        const first = recursive[a];
        const second = recursive[b];
        if (first === undefined || second === undefined) continue;
        if (starts.overlap(starts.of(first.option), starts.of(second.option))) {
          throw new AmbiguousRecursionError(paths.get(node) ?? "#", [first.index, second.index]);
        }
      }
    }
  }
}

/**
 * Tarjan's strongly connected components, iteratively (a deep schema must not overflow the call stack): each
 * node's component id; nodes on no cycle get a component of their own, unless they point to themselves.
 */
function stronglyConnected(
  root: SchemaNode,
  edges: (node: SchemaNode) => SchemaNode[],
): Map<SchemaNode, number> {
  const index = new Map<SchemaNode, number>();
  const low = new Map<SchemaNode, number>();
  const onStack = new Set<SchemaNode>();
  const stack: SchemaNode[] = [];
  const component = new Map<SchemaNode, number>();
  let counter = 0;
  let components = 0;
  const work: { node: SchemaNode; next: SchemaNode[]; at: number }[] = [];
  const enter = (node: SchemaNode) => {
    index.set(node, counter);
    low.set(node, counter);
    counter++;
    stack.push(node);
    onStack.add(node);
    work.push({ node, next: edges(node), at: 0 });
  };
  enter(root);
  while (work.length > 0) {
    const frame = work[work.length - 1] as (typeof work)[number];
    if (frame.at < frame.next.length) {
      const child = frame.next[frame.at++] as SchemaNode;
      if (!index.has(child)) enter(child);
      else if (onStack.has(child))
        low.set(frame.node, Math.min(low.get(frame.node) ?? 0, index.get(child) ?? 0));
      continue;
    }
    work.pop();
    const parent = work[work.length - 1];
    if (parent !== undefined)
      low.set(parent.node, Math.min(low.get(parent.node) ?? 0, low.get(frame.node) ?? 0));
    if (low.get(frame.node) === index.get(frame.node)) {
      const members: SchemaNode[] = [];
      let member: SchemaNode | undefined;
      do {
        member = stack.pop() as SchemaNode;
        onStack.delete(member);
        members.push(member);
      } while (member !== frame.node);
      // A single node is a cycle only through an edge to itself; otherwise it gets no shared id (-1 - n is unique).
      const cyclic = members.length > 1 || edges(frame.node).includes(frame.node);
      for (const m of members) component.set(m, cyclic ? components : -1 - counter - components);
      components++;
    }
  }
  return component;
}

/** A JSON pointer for each node, by the first way it is reached (definitions by their own name). */
function firstPaths(graph: SchemaGraph): Map<SchemaNode, string> {
  const paths = new Map<SchemaNode, string>();
  const queue: [SchemaNode, string][] = [
    [graph.root, "#"],
    ...[...graph.defs].map(([name, node]): [SchemaNode, string] => [node, `#/$defs/${name}`]),
  ];
  for (let i = 0; i < queue.length; i++) {
    const [node, path] = queue[i] as [SchemaNode, string];
    if (paths.has(node)) continue;
    paths.set(node, path);
    if (node.kind === "array") {
      queue.push([node.items, `${path}/items`]);
      for (const [j, item] of (node.prefix ?? []).entries()) queue.push([item, `${path}/prefixItems/${j}`]);
    } else if (node.kind === "anyOf") {
      for (const [j, option] of node.options.entries()) queue.push([option, `${path}/anyOf/${j}`]);
    } else if (node.kind === "object") {
      for (const p of node.properties) queue.push([p.schema, `${path}/properties/${p.name}`]);
      if (node.additional !== false) queue.push([node.additional, `${path}/additionalProperties`]);
    }
  }
  return paths;
}

/** Expansions of node starts, and comparisons of two starts, at most per schema: beyond, assume the worst. */
const MAX_EXPANSIONS = 50_000;
const MAX_COMPARISONS = 200_000;

/**
 * The ways a node's compact JSON can begin, up to PREFIX_CHARS characters. Memoised per node, except a start
 * computed while one of its own enclosing nodes was being expanded (it depends on where the expansion began).
 */
class PrefixFinder {
  private readonly memo = new Map<SchemaNode, string[]>();
  private readonly expanding = new Set<SchemaNode>();
  private expansions = 0;
  private cutShort = 0;
  comparisons = 0;

  constructor(private readonly graph: SchemaGraph) {}

  of(node: SchemaNode): string[] {
    const known = this.memo.get(node);
    if (known !== undefined) return known;
    // Back into a node being expanded (or out of budget): anything may follow here.
    if (this.expanding.has(node) || ++this.expansions > MAX_EXPANSIONS) {
      this.cutShort++;
      return [ANY_REST];
    }
    const cutBefore = this.cutShort;
    this.expanding.add(node);
    const found = bounded(this.compute(node));
    this.expanding.delete(node);
    if (this.cutShort === cutBefore) this.memo.set(node, found);
    return found;
  }

  /** Whether some start of `a` and some start of `b` could begin the same text (true once out of budget). */
  overlap(a: readonly string[], b: readonly string[]): boolean {
    this.comparisons += a.length * b.length;
    if (this.comparisons > MAX_COMPARISONS) return true;
    return a.some((x) => b.some((y) => compatible(x, y)));
  }

  private compute(node: SchemaNode): string[] {
    switch (node.kind) {
      case "any":
        return [ANY_REST];
      case "literal":
        return node.values.map((value) =>
          typeof value === "number" ? `${NUMBER_START}${ANY_REST}` : (JSON.stringify(value) ?? "null"),
        );
      case "string":
        return [`"${ANY_REST}`];
      case "integer":
      case "number":
        return [`${NUMBER_START}${ANY_REST}`];
      case "boolean":
        return ["true", "false"];
      case "null":
        return ["null"];
      case "array": {
        const first = node.prefix?.[0] ?? node.items;
        const starts = node.maxItems === 0 ? [] : this.of(first).map((item) => `[${item}`);
        return node.minItems === 0 ? ["[]", ...starts] : starts;
      }
      case "object": {
        if (node.properties.length === 0) {
          return node.additional === false ? ["{}"] : ["{}", `{"${ANY_REST}`];
        }
        // The first property written is the first required one or any optional one before it.
        const starts: string[] = [];
        for (const property of node.properties) {
          const key = `{${JSON.stringify(property.name)}:`;
          for (const value of this.of(property.schema)) starts.push(`${key}${value}`);
          if (property.required) return starts;
        }
        return [...starts, "{}"];
      }
      case "anyOf":
        return node.options.flatMap((option) => this.of(option));
      case "ref": {
        const target = this.graph.defs.get(node.name);
        return target === undefined ? [ANY_REST] : this.of(target);
      }
      default:
        return node satisfies never;
    }
  }
}

/** Cuts each start at PREFIX_CHARS (what follows may be anything) and keeps at most MAX_PREFIXES of them. */
function bounded(starts: string[]): string[] {
  const cut = [
    ...new Set(starts.map((s) => (s.length > PREFIX_CHARS ? `${s.slice(0, PREFIX_CHARS)}${ANY_REST}` : s))),
  ];
  // Too many distinct starts to compare: assume any.
  return cut.length > MAX_PREFIXES ? [ANY_REST] : cut;
}

/** Whether two starts could begin the same text. */
function compatible(x: string, y: string): boolean {
  for (let i = 0; ; i++) {
    const cx = x[i];
    const cy = y[i];
    // Both ended: the same whole value. One ended: a whole JSON value never begins a longer one.
    if (cx === undefined || cy === undefined) return cx === cy;
    if (cx === ANY_REST || cy === ANY_REST) return true;
    if (cx === cy) continue;
    if (cx === NUMBER_START) return /[-0-9]/.test(cy);
    if (cy === NUMBER_START) return /[-0-9]/.test(cx);
    return false;
  }
}
