// Numeric bounds by grammar: integers and decimals in any range, written digit by digit (no exponent), so that every
// text the grammar admits parses with JSON.parse to a number within the bounds.

/** One side of a range: `minimum`/`maximum` (inclusive) or `exclusiveMinimum`/`exclusiveMaximum`. */
export interface Bound {
  value: number;
  exclusive: boolean;
}

export interface NumericConstraint {
  integer: boolean;
  lower?: Bound | undefined;
  upper?: Bound | undefined;
}

/**
 * Integers with a bound are kept to the safe integers (zod writes exactly ±(2^53−1)): JSON.parse reads each of them
 * exactly. Decimals with a bound have at most 15 significant digits, so two different texts never parse to the same
 * double and an exclusive bound stays exclusive after parsing.
 */
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const DIGITS = 15;
const DECIMAL_LIMIT = 10n ** BigInt(DIGITS);

/** A non-negative decimal: integer part and fraction digits without trailing zeros. */
interface Decimal {
  int: bigint;
  frac: string;
}
interface Side {
  lo: Decimal;
  loIncl: boolean;
  hi: Decimal;
  hiIncl: boolean;
}

/** The exact decimal digits of a finite number (JavaScript's shortest round-trip text, exponent expanded). */
function decimalOf(x: number): Decimal {
  const match = /^(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(Math.abs(x).toString());
  if (match === null) throw new Error(`not a finite number: ${x}`);
  const digits = `${match[1]}${match[2] ?? ""}`;
  const point = (match[1] as string).length + Number(match[3] ?? 0);
  const padded = point <= 0 ? "0".repeat(1 - point) + digits : digits.padEnd(point, "0");
  const at = Math.max(point, 1);
  return { int: BigInt(padded.slice(0, at)), frac: padded.slice(at).replace(/0+$/, "") };
}

function compare(a: Decimal, b: Decimal): number {
  if (a.int !== b.int) return a.int < b.int ? -1 : 1;
  const width = Math.max(a.frac.length, b.frac.length);
  const x = a.frac.padEnd(width, "0");
  const y = b.frac.padEnd(width, "0");
  return x === y ? 0 : x < y ? -1 : 1;
}

const ZERO: Decimal = { int: 0n, frac: "" };
const LIMIT: Decimal = { int: DECIMAL_LIMIT, frac: "" };

function nonEmpty(side: Side): boolean {
  const order = compare(side.lo, side.hi);
  return order < 0 || (order === 0 && side.loIncl && side.hiIncl);
}

/** The non-negative values (`positive`) and the magnitudes of the negative ones (`negative`) of a decimal range. */
function decimalSides(c: NumericConstraint): { positive?: Side; negative?: Side } {
  const { lower, upper } = c;
  const capped = (b: Bound): { d: Decimal; incl: boolean } =>
    Math.abs(b.value) >= Number(DECIMAL_LIMIT)
      ? { d: LIMIT, incl: false }
      : { d: decimalOf(b.value), incl: !b.exclusive };
  const sides: { positive?: Side; negative?: Side } = {};
  if (upper === undefined || upper.value >= 0) {
    const lo = lower === undefined || lower.value < 0 ? { d: ZERO, incl: true } : capped(lower);
    const hi = upper === undefined ? { d: LIMIT, incl: false } : capped(upper);
    const side = { lo: lo.d, loIncl: lo.incl, hi: hi.d, hiIncl: hi.incl };
    if (nonEmpty(side) && compare(side.lo, LIMIT) < 0) sides.positive = side;
  }
  if (lower === undefined || lower.value < 0) {
    const lo = upper === undefined || upper.value >= 0 ? { d: ZERO, incl: false } : capped(upper);
    const hi = lower === undefined ? { d: LIMIT, incl: false } : capped(lower);
    const side = { lo: lo.d, loIncl: lo.incl, hi: hi.d, hiIncl: hi.incl };
    if (nonEmpty(side) && compare(side.lo, LIMIT) < 0) sides.negative = side;
  }
  return sides;
}

/** Inclusive integer bounds, within the safe integers; undefined when no integer is in range. */
function integerBounds(c: NumericConstraint): { lo: bigint; hi: bigint } | undefined {
  const toInt = (b: Bound | undefined, up: boolean): bigint => {
    if (b === undefined) return up ? MAX_SAFE : -MAX_SAFE;
    // Beyond the safe integers: the bound keeps nothing out (or everything, for a lower bound above them).
    if (b.value > Number.MAX_SAFE_INTEGER) return up ? MAX_SAFE : MAX_SAFE + 1n;
    if (b.value < -Number.MAX_SAFE_INTEGER) return up ? -MAX_SAFE - 1n : -MAX_SAFE;
    if (up) return BigInt(b.exclusive ? Math.ceil(b.value) - 1 : Math.floor(b.value));
    return BigInt(b.exclusive ? Math.floor(b.value) + 1 : Math.ceil(b.value));
  };
  const lo = toInt(c.lower, false);
  const hi = toInt(c.upper, true);
  return lo <= hi ? { lo, hi } : undefined;
}

/** GBNF for numbers in a range; counts the repetitions llama.cpp expands (`[0-9]{0,14}` is 14). */
export class NumberGrammar {
  repetitions = 0;

  /** The expression, or undefined when no number satisfies the constraint. */
  expression(c: NumericConstraint): string | undefined {
    const alternatives: string[] = [];
    if (c.integer) {
      const bounds = integerBounds(c);
      if (bounds === undefined) return undefined;
      const { lo, hi } = bounds;
      if (hi >= 0n) alternatives.push(this.intRange(lo > 0n ? lo : 0n, hi));
      const negLo = hi < -1n ? -hi : 1n;
      if (lo < 0n && negLo <= -lo) alternatives.push(`"-" ${paren(this.intRange(negLo, -lo))}`);
    } else {
      const { positive, negative } = decimalSides(c);
      if (positive !== undefined) alternatives.push(...this.decimals(positive));
      if (negative !== undefined) {
        const magnitudes = this.decimals(negative);
        if (magnitudes.length > 0) alternatives.push(`"-" ${group(magnitudes)}`);
      }
    }
    return alternatives.length === 0 ? undefined : group(alternatives);
  }

  private rep(cls: string, min: number, max: number): string {
    if (max <= 0) return "";
    this.repetitions += max;
    return min === max && max === 1 ? cls : `${cls}{${min},${max}}`;
  }

  /** Digit strings of one length between `a` and `b` (inclusive). */
  private sameLength(a: string, b: string): string {
    if (a === b) return a === "" ? "" : `"${a}"`;
    const a0 = Number(a[0]);
    const b0 = Number(b[0]);
    const restA = a.slice(1);
    const restB = b.slice(1);
    if (a0 === b0) return seq(`"${a0}"`, this.sameLength(restA, restB));
    const alternatives: string[] = [];
    let from = a0;
    if (!/^0*$/.test(restA)) {
      alternatives.push(seq(`"${a0}"`, this.sameLength(restA, "9".repeat(restA.length))));
      from = a0 + 1;
    }
    let to = b0;
    if (!/^9*$/.test(restB)) {
      alternatives.push(seq(`"${b0}"`, this.sameLength("0".repeat(restB.length), restB)));
      to = b0 - 1;
    }
    if (from <= to) alternatives.push(seq(digits(from, to), this.rep("[0-9]", restA.length, restA.length)));
    return group(alternatives);
  }

  /** Non-negative integers from `a` to `b` without leading zeros. */
  private intRange(a: bigint, b: bigint): string {
    const sa = a.toString();
    const sb = b.toString();
    if (sa.length === sb.length) return this.sameLength(sa, sb);
    const alternatives = [this.sameLength(sa, "9".repeat(sa.length))];
    if (sb.length - sa.length >= 2) {
      alternatives.push(seq("[1-9]", this.rep("[0-9]", sa.length, sb.length - 2)));
    }
    alternatives.push(this.sameLength(`1${"0".repeat(sb.length - 1)}`, sb));
    return group(alternatives);
  }

  /** Decimals (integer part, optional fraction) whose value is in the side's range. */
  private decimals(side: Side): string[] {
    const room = (int: bigint) => Math.max(0, DIGITS - int.toString().length);
    const { lo, hi } = side;
    if (lo.int === hi.int) {
      const f = this.fraction(lo.frac, side.loIncl, hi.frac, side.hiIncl, room(lo.int));
      return withFraction(`"${lo.int}"`, f);
    }
    const alternatives = withFraction(
      `"${lo.int}"`,
      this.fraction(lo.frac, side.loIncl, null, false, room(lo.int)),
    );
    // Whole integer parts strictly between: any fraction their length leaves room for. Lengths covered whole are
    // one chain of digits (a parse follows one path, not one per length); partly covered ones are ranges.
    const first = lo.int + 1n;
    const last = hi.int - 1n;
    const whole: number[] = [];
    for (let length = first.toString().length; first <= last && length <= last.toString().length; length++) {
      const from = length === 1 ? 0n : 10n ** BigInt(length - 1);
      const to = 10n ** BigInt(length) - 1n;
      const a = first > from ? first : from;
      const b = last < to ? last : to;
      if (a > b) continue;
      if (length > 1 && a === from && b === to) {
        whole.push(length);
        continue;
      }
      alternatives.push(`${paren(this.sameLength(a.toString(), b.toString()))}${this.anyFraction(room(b))}`);
    }
    if (whole.length > 0) {
      alternatives.push(
        this.digitChain(whole[0] as number, whole[whole.length - 1] as number, (n) =>
          room(10n ** BigInt(n - 1)),
        ),
      );
    }
    if (hi.int < DECIMAL_LIMIT) {
      alternatives.push(
        ...withFraction(`"${hi.int}"`, this.fraction("", true, hi.frac, side.hiIncl, room(hi.int))),
      );
    }
    return alternatives;
  }

  private anyFraction(room: number): string {
    return room === 0 ? "" : ` ( "." ${this.rep("[0-9]", 1, room)} )?`;
  }

  /**
   * Integer parts of every length from `min` to `max` digits, each followed by any fraction its length leaves room
   * for: `[1-9]`, then after each further digit the choice to stop (a fraction may follow) or to go on.
   */
  private digitChain(min: number, max: number, room: (length: number) => number): string {
    let tail = this.anyFraction(room(max)).trim();
    for (let length = max - 1; length >= 1; length--) {
      const next = tail === "" ? "[0-9]" : `[0-9] ${tail}`;
      if (length < min) tail = next;
      else {
        const stop = this.anyFraction(room(length)).trim();
        tail = stop === "" ? `( ${next} )?` : `( ${next} | ${stop} )`;
      }
    }
    return `[1-9] ${tail}`.trim();
  }

  /**
   * Fraction digits (at most `room`, none at all meaning 0) whose value 0.d lies between 0.lo and 0.hi (`hi` null:
   * no upper bound). `expr` is the non-empty strings, `empty` whether writing no fraction is allowed.
   */
  private fraction(lo: string, loIncl: boolean, hi: string | null, hiIncl: boolean, room: number): Fraction {
    const empty = lo === "" && loIncl && (hi === null || hi !== "" || hiIncl);
    if (room <= 0) return { empty };
    // The upper bound is exactly 0 from here on: only zeros, and only when 0 itself is allowed.
    if (hi === "") return empty ? { empty, expr: this.rep("[0]", 1, room) } : { empty };
    if (lo === "" && loIncl && hi === null) return { empty, expr: this.rep("[0-9]", 1, room) };
    const cl = Number(lo[0] ?? "0");
    const ch = hi === null ? 10 : Number(hi[0]);
    const alternatives: string[] = [];
    if (cl + 1 <= ch - 1) {
      alternatives.push(seq(digits(cl + 1, Math.min(ch - 1, 9)), this.rep("[0-9]", 0, room - 1)));
    }
    const push = (digit: number, rest: Fraction) => {
      if (rest.expr === undefined && !rest.empty) return;
      const tail = rest.expr === undefined ? "" : rest.empty ? `( ${rest.expr} )?` : paren(rest.expr);
      alternatives.push(seq(`"${digit}"`, tail));
    };
    if (hi !== null && cl === ch) {
      push(cl, this.fraction(lo.slice(1), loIncl, hi.slice(1), hiIncl, room - 1));
    } else {
      push(cl, this.fraction(lo.slice(1), loIncl, null, false, room - 1));
      if (hi !== null) push(ch, this.fraction("", true, hi.slice(1), hiIncl, room - 1));
    }
    return alternatives.length === 0 ? { empty } : { empty, expr: alternatives.join(" | ") };
  }
}

interface Fraction {
  expr?: string;
  empty: boolean;
}

function withFraction(int: string, f: Fraction): string[] {
  if (f.expr === undefined) return f.empty ? [int] : [];
  return [f.empty ? `${int} ( "." ( ${f.expr} ) )?` : `${int} "." ( ${f.expr} )`];
}

function digits(from: number, to: number): string {
  return from === to ? `"${from}"` : `[${from}-${to}]`;
}

function seq(...parts: string[]): string {
  return parts.filter((p) => p !== "").join(" ");
}

function paren(expression: string): string {
  return /^("[^"]*"|\[[^\]]*\](\{\d+,\d+\})?)$/.test(expression) ? expression : `( ${expression} )`;
}

function group(alternatives: readonly string[]): string {
  const unique = [...new Set(alternatives.filter((a) => a !== ""))];
  return unique.length === 1 ? (unique[0] as string) : `( ${unique.join(" | ")} )`;
}

// --- the shortest number in range, and the check after generation ---

/** The shortest JSON text of a number satisfying the constraint (and `multipleOf`), or undefined if none. */
export function shortestNumber(c: NumericConstraint, multipleOf?: number): string | undefined {
  const candidates: string[] = [];
  if (c.integer) {
    const bounds = integerBounds(c);
    if (bounds === undefined) return undefined;
    const step = multipleOf !== undefined && Number.isInteger(multipleOf) ? BigInt(multipleOf) : 1n;
    const ceil = (x: bigint) => (x % step === 0n ? x : x > 0n ? (x / step + 1n) * step : (x / step) * step);
    const floor = (x: bigint) => (x % step === 0n ? x : x > 0n ? (x / step) * step : (x / step - 1n) * step);
    const { lo, hi } = bounds;
    const up = ceil(lo > 0n ? lo : 0n);
    if (up <= hi) candidates.push(up.toString());
    const down = floor(hi < 0n ? hi : -1n);
    if (down >= lo && down < 0n) candidates.push(down.toString());
  } else {
    const { positive, negative } = decimalSides(c);
    const p = positive === undefined ? undefined : shortestIn(positive);
    const n = negative === undefined ? undefined : shortestIn(negative);
    if (p !== undefined) candidates.push(p);
    if (n !== undefined) candidates.push(`-${n}`);
  }
  if (multipleOf !== undefined && !(c.integer && Number.isInteger(multipleOf))) {
    candidates.push(...nearestMultiples(c, multipleOf));
  }
  const valid = candidates.filter(
    (text) =>
      numberProblem(Number(text), c, multipleOf) === undefined &&
      text.replace(/^-|\./g, "").length <= (c.integer ? 16 : DIGITS),
  );
  return valid.sort((a, b) => a.length - b.length)[0];
}

/** The multiples of `step` nearest 0 on each side within the bounds, written with at most 15 digits. */
function nearestMultiples(c: NumericConstraint, step: number): string[] {
  const low = c.lower === undefined ? Number.NEGATIVE_INFINITY : c.lower.value / step;
  const high = c.upper === undefined ? Number.POSITIVE_INFINITY : c.upper.value / step;
  const ks = [
    Math.max(0, Math.ceil(low)),
    Math.min(0, Math.floor(high)),
    Math.ceil(low) + 1,
    Math.floor(high) - 1,
  ];
  return ks
    .filter((k) => Number.isFinite(k) && Number.isSafeInteger(k))
    .map((k) => String(Number((k * step).toPrecision(DIGITS))))
    .filter((text) => /^-?\d+(\.\d+)?$/.test(text));
}

/** The shortest decimal text in a side's range: the fewest fraction digits, then the smallest value. */
function shortestIn(side: Side): string | undefined {
  for (let k = 0; k < DIGITS; k++) {
    const scale = 10n ** BigInt(k);
    const exact = side.lo.frac.length <= k;
    const floor = side.lo.int * scale + BigInt(side.lo.frac.padEnd(k, "0").slice(0, k) || "0");
    const scaled = exact && side.loIncl ? floor : floor + 1n;
    const candidate: Decimal = {
      int: scaled / scale,
      frac: (scaled % scale).toString().padStart(k, "0").replace(/0+$/, ""),
    };
    const order = compare(candidate, side.hi);
    if (order > 0 || (order === 0 && !side.hiIncl)) continue;
    if (candidate.int.toString().length + candidate.frac.length > DIGITS) return undefined;
    return candidate.frac === "" ? candidate.int.toString() : `${candidate.int}.${candidate.frac}`;
  }
  return undefined;
}

/** Multiples written out as alternatives at most: past this, `multipleOf` is validated after generation. */
export const MAX_ENUMERATED_MULTIPLES = 64;

/**
 * Every multiple of `step` within both bounds as JSON text, when there are at most MAX_ENUMERATED_MULTIPLES of
 * them (the grammar then enforces `multipleOf` as a choice among them); undefined otherwise.
 */
export function enumeratedMultiples(c: NumericConstraint, step: number): string[] | undefined {
  if (c.lower === undefined || c.upper === undefined) return undefined;
  const first = Math.ceil(c.lower.value / step);
  const last = Math.floor(c.upper.value / step);
  if (
    !Number.isSafeInteger(first) ||
    !Number.isSafeInteger(last) ||
    last - first >= 2 * MAX_ENUMERATED_MULTIPLES
  ) {
    return undefined;
  }
  const texts: string[] = [];
  for (let k = first; k <= last; k++) {
    const text = String(Number((k * step).toPrecision(DIGITS)));
    if (!/^-?\d+(\.\d+)?$/.test(text) || numberProblem(Number(text), c, step) !== undefined) continue;
    if (c.integer && !Number.isInteger(Number(text))) continue;
    texts.push(text === "-0" ? "0" : text);
  }
  return texts.length > 0 && texts.length <= MAX_ENUMERATED_MULTIPLES ? texts : undefined;
}

/** Why `value` breaks the constraint, or undefined. */
export function numberProblem(value: number, c: NumericConstraint, multipleOf?: number): string | undefined {
  const { lower, upper } = c;
  if (lower !== undefined && (lower.exclusive ? !(value > lower.value) : !(value >= lower.value))) {
    return `${lower.exclusive ? "not greater than" : "less than"} ${lower.value}`;
  }
  if (upper !== undefined && (upper.exclusive ? !(value < upper.value) : !(value <= upper.value))) {
    return `${upper.exclusive ? "not less than" : "greater than"} ${upper.value}`;
  }
  if (multipleOf !== undefined && !isMultiple(value, multipleOf)) return `not a multiple of ${multipleOf}`;
  return undefined;
}

/** Exact for integers; for decimals, within the rounding of the division (as validators do). */
export function isMultiple(value: number, step: number): boolean {
  if (Number.isInteger(value) && Number.isInteger(step)) return value % step === 0;
  const quotient = value / step;
  return Math.abs(quotient - Math.round(quotient)) < 1e-9;
}
