// Prompt caches kept in host memory beyond the slots (llama-server's --cache-ram): before a slot is overwritten, what
// it holds is saved; a later prompt that shares more with a saved state than with any slot has it loaded into a
// free slot instead of evaluating it again. A state is a node-llama-cpp state file (the public saveStateToFile /
// loadStateFromFile) in a private folder on a memory file system, so an entry costs RAM, never disk. Bounded in
// bytes; the least recently used entries go first. Only the step loop saves, loads and evicts, between decodes.
import { mkdtemp, readdir, rm, stat, statfs } from "node:fs/promises";
import { join } from "node:path";
import { commonPrefixLength, type StoredMatch } from "./slot-choice.js";

/** What the store needs of a sequence (a LlamaContextSequence; a plain object in the unit tests). */
export interface StatefulSequence {
  readonly contextTokens: readonly number[];
  saveStateToFile(path: string): Promise<unknown>;
  loadStateFromFile(path: string, acceptRisk: { acceptRisk: true }): Promise<void>;
}

export interface StoredPrompt {
  readonly id: number;
  /** Cache scope (organization) that put the tokens there: an entry serves only its own scope. */
  readonly scope: string;
  readonly tokens: readonly number[];
  readonly bytes: number;
  lastUsed: number;
  /** Leases about to load it: never evicted while pinned. */
  pins: number;
}

/**
 * Entries at most, whatever their size: `match` compares a prompt with each of them at every admission that can
 * make a lease, so their number bounds that work (prompts on one long system prompt share it with every entry).
 */
export const MAX_ENTRIES = 256;

export class PromptStore {
  private readonly entries = new Map<number, StoredPrompt>();
  private nextId = 1;
  private clock = 0;
  private used = 0;
  /** Bytes per token of the last state saved: a state too large for the store is not written at all. */
  private bytesPerToken = 0;

  /** `dir` is the store's own folder (`createPromptStore`); it is removed with the store. */
  constructor(
    readonly dir: string,
    readonly capacityBytes: number,
  ) {}

  /** Bytes held by the entries. */
  get bytes(): number {
    return this.used;
  }

  get size(): number {
    return this.entries.size;
  }

  /** The entry of `scope` sharing the longest prefix with `prompt`, if any shares a token. */
  match(prompt: readonly number[], scope: string): StoredMatch | undefined {
    const last = prompt.length - 1;
    let found: StoredMatch | undefined;
    for (const entry of this.entries.values()) {
      if (entry.scope !== scope) continue;
      const shared = Math.min(commonPrefixLength(entry.tokens, prompt), last);
      if (shared > (found?.shared ?? 0)) found = { id: entry.id, shared };
    }
    return found;
  }

  /** Whether an entry of `scope` already holds `tokens` (and maybe more). */
  covers(tokens: readonly number[], scope: string): boolean {
    for (const entry of this.entries.values()) {
      if (entry.scope === scope && commonPrefixLength(entry.tokens, tokens) === tokens.length) return true;
    }
    return false;
  }

  /** A lease will load the entry: it stays until `unpin`. */
  pin(id: number): void {
    const entry = this.entries.get(id);
    if (entry !== undefined) entry.pins++;
  }

  unpin(id: number): void {
    const entry = this.entries.get(id);
    if (entry !== undefined && entry.pins > 0) entry.pins--;
  }

  /**
   * Saves what `sequence` holds, unless an entry holds it already or it would take more than a quarter of the
   * store (the save holds the step loop while it writes); entries it extends (their tokens a prefix of its) are
   * dropped. Then evicts the least recently used unpinned entries while over capacity or MAX_ENTRIES. Never
   * throws: a failed save (a full file system) only means no entry.
   */
  async save(sequence: StatefulSequence, scope: string): Promise<boolean> {
    const tokens = [...sequence.contextTokens];
    if (tokens.length === 0 || this.covers(tokens, scope)) return false;
    if (tokens.length * this.bytesPerToken > this.capacityBytes / 4) return false;
    const id = this.nextId++;
    const file = this.fileOf(id);
    let bytes: number;
    try {
      await sequence.saveStateToFile(file);
      bytes = (await stat(file)).size;
    } catch {
      await rm(file, { force: true }).catch(() => undefined);
      return false;
    }
    for (const entry of [...this.entries.values()]) {
      if (
        entry.scope === scope &&
        entry.pins === 0 &&
        commonPrefixLength(entry.tokens, tokens) === entry.tokens.length
      )
        this.remove(entry);
    }
    this.bytesPerToken = bytes / tokens.length;
    this.entries.set(id, { id, scope, tokens, bytes, lastUsed: ++this.clock, pins: 0 });
    this.used += bytes;
    this.evict();
    return this.entries.has(id);
  }

  /**
   * Loads the entry into `sequence` (what it held is replaced) and unpins it. False when the entry is gone or the
   * load failed; the sequence may then hold anything, and the caller clears it.
   */
  async load(id: number, sequence: StatefulSequence): Promise<boolean> {
    const entry = this.entries.get(id);
    if (entry === undefined) return false;
    this.unpin(id);
    entry.lastUsed = ++this.clock;
    try {
      await sequence.loadStateFromFile(this.fileOf(id), { acceptRisk: true });
    } catch {
      this.remove(entry);
      return false;
    }
    return commonPrefixLength(sequence.contextTokens, entry.tokens) === entry.tokens.length;
  }

  /** Removes every entry and the folder. */
  async dispose(): Promise<void> {
    this.entries.clear();
    this.used = 0;
    await rm(this.dir, { recursive: true, force: true });
  }

  private evict(): void {
    while (this.used > this.capacityBytes || this.entries.size > MAX_ENTRIES) {
      let oldest: StoredPrompt | undefined;
      for (const entry of this.entries.values()) {
        if (entry.pins === 0 && (oldest === undefined || entry.lastUsed < oldest.lastUsed)) oldest = entry;
      }
      if (oldest === undefined) return;
      this.remove(oldest);
    }
  }

  private remove(entry: StoredPrompt): void {
    this.entries.delete(entry.id);
    this.used -= entry.bytes;
    void rm(this.fileOf(entry.id), { force: true }).catch(() => undefined);
  }

  private fileOf(id: number): string {
    return join(this.dir, `${id}.state`);
  }
}

/** Where stores keep their states: Linux's memory file system. */
export const PROMPT_STORE_PARENT = "/dev/shm";

/** A store's folder: the prefix, its process's pid, "-" and mkdtemp's suffix. */
const FOLDER_PREFIX = "hearth-prompt-cache-";
const FOLDER_PID = new RegExp(`^${FOLDER_PREFIX}(\\d+)-`);

/**
 * A store of up to `capacityBytes` in a new private folder (mode 0700) under `parent` (a memory file system, so
 * the states are RAM), never more than half of the space free there (a small /dev/shm, as in a container, is
 * shared with other programs). Undefined when the capacity is 0 or the folder cannot be made.
 */
export async function createPromptStore(
  capacityBytes: number,
  parent: string = PROMPT_STORE_PARENT,
): Promise<PromptStore | undefined> {
  if (capacityBytes <= 0) return undefined;
  try {
    await sweepDeadStores(parent);
    const space = await statfs(parent);
    const capacity = Math.min(capacityBytes, Math.floor((space.bavail * space.bsize) / 2));
    if (capacity <= 0) return undefined;
    const dir = await mkdtemp(join(parent, `${FOLDER_PREFIX}${process.pid}-`));
    return new PromptStore(dir, capacity);
  } catch {
    return undefined;
  }
}

/**
 * Removes the folders of stores whose process is gone (killed before it could remove its own: kill -9, a crash), so
 * their states do not hold the memory file system's RAM until the next reboot.
 */
async function sweepDeadStores(parent: string): Promise<void> {
  for (const name of await readdir(parent)) {
    const pid = Number(FOLDER_PID.exec(name)?.[1]);
    if (!Number.isInteger(pid) || pid <= 0 || isAlive(pid)) continue;
    await rm(join(parent, name), { recursive: true, force: true }).catch(() => undefined);
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: alive, another user's.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
