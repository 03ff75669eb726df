// String `format` and `pattern` by grammar: GBNF for the string's content, its shortest value, and the check after
// generation (linear: formats by regexes without nested quantifiers, patterns by a position-set simulation).

/** The formats OpenAI's structured outputs support; each is enforced by grammar. */
export const STRING_FORMATS = [
  "date-time",
  "time",
  "date",
  "duration",
  "email",
  "hostname",
  "ipv4",
  "ipv6",
  "uuid",
] as const;
export type StringFormat = (typeof STRING_FORMATS)[number];

export function isStringFormat(value: unknown): value is StringFormat {
  return (STRING_FORMATS as readonly unknown[]).includes(value);
}

/**
 * GBNF rules per format, for the text between the quotes. Subsets of the RFCs where the full form would cost
 * grammar size for nothing a client needs: no leap seconds or 29 February (dates are valid in every year), IPv6
 * without an embedded IPv4 tail, hostnames and e-mail domains without the length limits (checked after), e-mail
 * addresses of the characters every validator accepts.
 */
const FORMAT_RULES: Readonly<Record<string, string>> = Object.freeze({
  // Up to 9999 of a unit: a duration every parser can hold (Python's timedelta ends near 2.7 million years).
  "fmt-digits": "[0-9]{1,4}",
  "fmt-hex": "[0-9a-fA-F]",
  "fmt-alnum": "[a-zA-Z0-9]",
  "fmt-label": 'fmt-alnum+ ( "-"+ fmt-alnum+ )*',
  "fmt-2h": '[01] [0-9] | "2" [0-3]',
  "fmt-2m": "[0-5] [0-9]",
  "fmt-date":
    '[0-9]{4} "-" ( ( "0" [13578] | "1" [02] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ) | ( "0" [469] | "11" ) "-" ( "0" [1-9] | [12] [0-9] | "30" ) | "02-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] ) )',
  "fmt-time": 'fmt-2h ":" fmt-2m ":" fmt-2m ( "." [0-9]{1,9} )? ( "Z" | [+-] fmt-2h ":" fmt-2m )',
  "fmt-date-time": 'fmt-date "T" fmt-time',
  "fmt-duration-time":
    'fmt-digits "H" ( fmt-digits "M" )? ( fmt-digits "S" )? | fmt-digits "M" ( fmt-digits "S" )? | fmt-digits "S"',
  "fmt-duration":
    '"P" ( ( fmt-digits "Y" ( fmt-digits "M" )? ( fmt-digits "D" )? | fmt-digits "M" ( fmt-digits "D" )? | fmt-digits "D" ) ( "T" fmt-duration-time )? | "T" fmt-duration-time | fmt-digits "W" )',
  // Letters, digits and `_+-` in dot-separated local parts, a top-level domain of letters: valid for every
  // validator we know (RFC 5322's other characters are not, for zod's and pydantic's).
  "fmt-email": '[a-zA-Z0-9_+-]+ ( "." [a-zA-Z0-9_+-]+ )* "@" ( fmt-label "." )+ [a-zA-Z] [a-zA-Z]+',
  "fmt-hostname": 'fmt-label ( "." fmt-label )*',
  "fmt-octet": '"25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9]',
  "fmt-ipv4": 'fmt-octet "." fmt-octet "." fmt-octet "." fmt-octet',
  "fmt-h16": "fmt-hex{1,4}",
  "fmt-ipv6": ipv6Rule(),
  "fmt-uuid": 'fmt-hex{8} "-" fmt-hex{4} "-" fmt-hex{4} "-" fmt-hex{4} "-" fmt-hex{12}',
});

/** Eight groups, or `::` with i groups before it and at most 7 − i after. */
function ipv6Rule(): string {
  const groups = (n: number) => (n <= 1 ? "fmt-h16" : `fmt-h16 ( ":" fmt-h16 ){${n - 1}}`);
  const upTo = (n: number) =>
    n <= 0 ? "" : n === 1 ? " fmt-h16?" : ` ( fmt-h16 ( ":" fmt-h16 ){0,${n - 1}} )?`;
  const alternatives = [groups(8)];
  for (let before = 0; before <= 7; before++) {
    const head = before === 0 ? '"::"' : `${groups(before)} "::"`;
    alternatives.push(`${head}${upTo(7 - before)}`);
  }
  return alternatives.join(" | ");
}

const RULE_DEPENDENCIES: Readonly<Record<string, readonly string[]>> = Object.freeze({
  "fmt-label": ["fmt-alnum"],
  "fmt-2h": [],
  "fmt-date": [],
  "fmt-time": ["fmt-2h", "fmt-2m"],
  "fmt-date-time": ["fmt-date", "fmt-time"],
  "fmt-duration-time": ["fmt-digits"],
  "fmt-duration": ["fmt-digits", "fmt-duration-time"],
  "fmt-email": ["fmt-label"],
  "fmt-hostname": ["fmt-label"],
  "fmt-ipv4": ["fmt-octet"],
  "fmt-h16": ["fmt-hex"],
  "fmt-ipv6": ["fmt-h16"],
  "fmt-uuid": ["fmt-hex"],
});

/** The rules a format's content needs (its own last), each `[name, body]`. */
export function formatRules(format: StringFormat): [string, string][] {
  const out = new Map<string, string>();
  const visit = (name: string) => {
    if (out.has(name)) return;
    for (const dependency of RULE_DEPENDENCIES[name] ?? []) visit(dependency);
    out.set(name, FORMAT_RULES[name] as string);
  };
  visit(`fmt-${format}`);
  return [...out];
}

/** The shortest value of each format (valid for the grammar and for validators). */
export const FORMAT_MINIMAL: Readonly<Record<StringFormat, string>> = Object.freeze({
  "date-time": "2000-01-01T00:00:00Z",
  time: "00:00:00Z",
  date: "2000-01-01",
  duration: "P0D",
  email: "a@a.aa", // a two-letter top-level domain: what zod's and most validators' e-mail regexes ask
  hostname: "a",
  ipv4: "0.0.0.0",
  ipv6: "::",
  uuid: "00000000-0000-0000-0000-000000000000",
});

// Checks after generation: no nested quantifier can backtrack, and lengths are bounded first.
const DATE =
  "\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|02-(?:0[1-9]|1\\d|2[0-9]))";
const TIME =
  "(?:[01]\\d|2[0-3]):[0-5]\\d:(?:[0-5]\\d|60)(?:\\.\\d+)?(?:[zZ]|[+-](?:[01]\\d|2[0-3]):[0-5]\\d)";
const LABEL = "[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?";
const OCTET = "(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)";
const FORMAT_CHECKS: Readonly<Record<StringFormat, { max: number; re: RegExp }>> = Object.freeze({
  "date-time": { max: 64, re: new RegExp(`^${DATE}[tT ]${TIME}$`) },
  time: { max: 48, re: new RegExp(`^${TIME}$`) },
  date: { max: 10, re: new RegExp(`^${DATE}$`) },
  duration: {
    max: 128,
    re: /^P(?!$)(?:(?:\d+Y)?(?:\d+M)?(?:\d+D)?(?:T(?=\d)(?:\d+H)?(?:\d+M)?(?:\d+S)?)?|\d+W)$/,
  },
  email: {
    max: 254,
    re: new RegExp(
      `^[a-zA-Z0-9!#$%&'*+/=?^_\`{|}~-]+(?:\\.[a-zA-Z0-9!#$%&'*+/=?^_\`{|}~-]+)*@(?:${LABEL}\\.)+${LABEL}$`,
    ),
  },
  hostname: { max: 253, re: new RegExp(`^${LABEL}(?:\\.${LABEL})*\\.?$`) },
  ipv4: { max: 15, re: new RegExp(`^${OCTET}(?:\\.${OCTET}){3}$`) },
  ipv6: { max: 45, re: /^[0-9a-fA-F:.]+$/ },
  uuid: { max: 36, re: /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/ },
});

/** Whether `value` is of the format. */
export function matchesFormat(value: string, format: StringFormat): boolean {
  const check = FORMAT_CHECKS[format];
  if (value.length > check.max || !check.re.test(value)) return false;
  return format === "ipv6" ? isIpv6(value) : true;
}

function isIpv6(value: string): boolean {
  const halves = value.split("::");
  if (halves.length > 2) return false;
  const groups = (text: string) => (text === "" ? [] : text.split(":"));
  const parts = halves.flatMap(groups);
  if (!parts.every((g) => /^[0-9a-fA-F]{1,4}$/.test(g))) return false;
  return halves.length === 2 ? parts.length <= 7 : parts.length === 8;
}
