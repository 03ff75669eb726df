// Shows model-fetch progress: a cli-progress bar on a terminal, sparse plain lines in logs and pipes.
import cliProgress from "cli-progress";

/** The phases of fetching a model, in order. */
export const FETCH_PHASES = Object.freeze(["downloading", "extracting", "verifying"] as const);
export type FetchPhase = (typeof FETCH_PHASES)[number];

/** Receives progress of one model fetch at a time. Calls are cheap; reporters decide how often to draw. */
export interface ProgressReporter {
  /** A phase of fetching `modelId` begins; `totalBytes` when known. */
  phase(modelId: string, phase: FetchPhase, totalBytes?: number): void;
  /** Bytes done so far in the current phase; a later `totalBytes` replaces an unknown or estimated one. */
  update(doneBytes: number, totalBytes?: number): void;
  /** The fetch ended, successfully or not; the reporter releases the terminal. */
  finish(): void;
}

/** For callers that want no output (the server logs instead, tests). */
export const silentProgress: ProgressReporter = Object.freeze({
  phase() {},
  update() {},
  finish() {},
});

export interface ProgressReporterOptions {
  /** Least time between two plain progress lines. */
  intervalMs?: number;
  /** Draw a bar even when the stream does not say it is a TTY (tests). */
  forceTty?: boolean;
}

type ProgressStream = NodeJS.WritableStream & { isTTY?: boolean };

const MB = 1_000_000;

function megabytes(bytes: number): string {
  return `${(bytes / MB).toFixed(1)} MB`;
}

function percent(done: number, total: number): number {
  return Math.min(100, Math.floor((done / total) * 100));
}

/** A bar on a TTY, plain lines otherwise. */
export function createProgressReporter(
  stream: ProgressStream = process.stderr,
  options: ProgressReporterOptions = {},
): ProgressReporter {
  return stream.isTTY === true || options.forceTty === true
    ? new BarProgress(stream)
    : new LineProgress(stream, options.intervalMs ?? 2000);
}

class LineProgress implements ProgressReporter {
  private modelId = "";
  private current: FetchPhase | undefined;
  private total: number | undefined;
  private lastLineAt = 0;

  constructor(
    private readonly stream: ProgressStream,
    private readonly intervalMs: number,
  ) {}

  phase(modelId: string, phase: FetchPhase, totalBytes?: number): void {
    this.modelId = modelId;
    this.current = phase;
    this.total = totalBytes;
    this.lastLineAt = Date.now();
    const size = totalBytes === undefined ? "" : ` (${megabytes(totalBytes)})`;
    this.write(`${phase}${size}`);
  }

  update(doneBytes: number, totalBytes?: number): void {
    // Nothing to tell before the first byte; the phase line already said what is happening.
    if (this.current === undefined || doneBytes <= 0) return;
    if (totalBytes !== undefined) this.total = totalBytes;
    const now = Date.now();
    if (now - this.lastLineAt < this.intervalMs) return;
    this.lastLineAt = now;
    const amount =
      this.total !== undefined && this.total > 0
        ? `${percent(doneBytes, this.total)}%`
        : megabytes(doneBytes);
    this.write(`${this.current} ${amount}`);
  }

  finish(): void {
    this.current = undefined;
  }

  private write(what: string): void {
    this.stream.write(`hearth: fetching ${this.modelId}: ${what}\n`);
  }
}

class BarProgress implements ProgressReporter {
  private bar: cliProgress.SingleBar | undefined;
  private total = 0;

  constructor(private readonly stream: ProgressStream) {}

  phase(modelId: string, phase: FetchPhase, totalBytes?: number): void {
    this.finish();
    this.total = totalBytes ?? 0;
    this.bar = new cliProgress.SingleBar({
      stream: this.stream,
      // Without a total (pip did not say the size) the bar cannot fill; the byte count still moves.
      format: (options, params, payload: { label: string }) => {
        const total = Math.max(params.total, 0);
        const bar = total > 0 ? cliProgress.Format.BarFormat(Math.min(1, params.value / total), options) : "";
        const amount =
          total > 0 ? `${percent(params.value, total)}% ${megabytes(params.value)}/${megabytes(total)}` : "";
        return `${payload.label} ${bar} ${amount || megabytes(params.value)}`;
      },
      barCompleteChar: "\u2588",
      barIncompleteChar: "\u2591",
      hideCursor: true,
      clearOnComplete: false,
      fps: 10,
    });
    this.bar.start(this.total, 0, { label: `hearth: ${modelId} ${phase}` });
  }

  update(doneBytes: number, totalBytes?: number): void {
    if (this.bar === undefined) return;
    if (totalBytes !== undefined && totalBytes !== this.total) {
      this.total = totalBytes;
      this.bar.setTotal(totalBytes);
    }
    this.bar.update(this.total > 0 ? Math.min(doneBytes, this.total) : doneBytes);
  }

  finish(): void {
    if (this.bar === undefined) return;
    this.bar.stop();
    this.bar = undefined;
  }
}

/** Both reporters see every call (the terminal's bar and the engine's recorded progress). */
export function teeProgress(a: ProgressReporter, b: ProgressReporter | undefined): ProgressReporter {
  if (b === undefined) return a;
  return {
    phase(modelId, phase, totalBytes) {
      a.phase(modelId, phase, totalBytes);
      b.phase(modelId, phase, totalBytes);
    },
    update(doneBytes, totalBytes) {
      a.update(doneBytes, totalBytes);
      b.update(doneBytes, totalBytes);
    },
    finish() {
      a.finish();
      b.finish();
    },
  };
}
