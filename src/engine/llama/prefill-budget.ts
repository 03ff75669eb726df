// How many prompt tokens a step may carry while choices generate. Every token of a step waits for the whole decode,
// so a prompt joining the batch stretches each generating stream's gap to its next token: the stutter a client sees
// as the inter-token tail. The budget keeps such a step within `stretch` × a generation-only step of the same
// streams (Sarathi-Serve's stall-free batching, with the token budget learned from this machine's own steps instead
// of configured). Two exceptions keep prompts from waiting too long for it:
// - while stretched steps are rare, a step may take a whole chunk: a few in a hundred steps reach no client's 95th
//   percentile, and a prompt evaluated in one step starts generating sooner;
// - a prompt is spread over at most PROMPT_STEPS steps (chunks of at most `maxChunk`): splitting a long prompt finely
//   would add a generation step's time per chunk to its first token.

export interface PrefillBudgetOptions {
  /** Most prompt tokens a step carries while others generate (the model's `prefillChunk`). */
  maxChunk: number;
  /**
   * A step carrying prompt tokens may take this many times a generation-only step (the model's `prefillStretch`).
   * 0 learns nothing: every step may carry `maxChunk`.
   */
  stretch: number;
}

/** A step of the current streams, as the loop timed it. */
export interface StepSample {
  /** Choices that generated a token in the step. */
  generating: number;
  /** Prompt tokens the step evaluated. */
  promptTokens: number;
  /** Wall time of the step's evaluations. */
  ms: number;
}

/** The fewest prompt tokens a step may carry, so that a prompt always progresses. */
export const MIN_PROMPT_TOKENS = 8;
/** A prompt's evaluation is spread over at most this many steps (unless that takes chunks over `maxChunk`). */
export const PROMPT_STEPS = 4;
/** Generating steps over which stretched steps are counted. */
export const STRETCH_WINDOW = 100;
/** Stretched steps allowed in the window: 3 %, under the 5 % a 95th percentile leaves out. */
export const RARE_STRETCHES = 3;
/** Weight of the newest sample in the running averages (the machine drifts; one step is noisy). */
const ALPHA = 0.2;

export class PrefillBudget {
  /** Running average of a generation-only step's time, by the number of generating choices. */
  private readonly generationMs = new Map<number, number>();
  /** Running average of what one prompt token adds to a step. */
  private promptTokenMs: number | undefined;
  /** The last STRETCH_WINDOW generating steps: whether each carried more than its budget. */
  private readonly window: boolean[] = [];
  private stretched = 0;

  constructor(private readonly options: PrefillBudgetOptions) {}

  /** Prompt tokens a step of `generating` choices may carry within the stretch (at most `maxChunk`). */
  tokens(generating: number): number {
    const { maxChunk, stretch } = this.options;
    const perToken = this.promptTokenMs;
    const step = this.generationStep(generating);
    if (stretch === 0 || perToken === undefined || step === undefined || perToken <= 0) return maxChunk;
    const fits = Math.floor(((stretch - 1) * step) / perToken);
    return Math.max(MIN_PROMPT_TOKENS, Math.min(maxChunk, fits));
  }

  /**
   * Prompt tokens a step of `generating` choices may carry, `longest` the most prompt tokens one of its waiting
   * prompts evaluates: a whole chunk while stretched steps are rare, else `tokens(generating)`, but at least what
   * spreads that prompt over PROMPT_STEPS steps.
   */
  allowance(generating: number, longest: number): number {
    const { maxChunk } = this.options;
    if (this.stretched < RARE_STRETCHES) return maxChunk;
    return Math.max(this.tokens(generating), Math.min(maxChunk, Math.ceil(longest / PROMPT_STEPS)));
  }

  /** Learns from a finished step that generated (`generating` > 0), and counts it in the window. */
  record(sample: StepSample): void {
    const { generating, promptTokens, ms } = sample;
    // Off: every step may take the whole chunk, nothing to learn or count.
    if (this.options.stretch === 0 || generating <= 0 || !(ms >= 0)) return;
    const overBudget = promptTokens > this.tokens(generating);
    if (promptTokens === 0) {
      this.generationMs.set(generating, average(this.generationMs.get(generating), ms));
    } else {
      const step = this.generationMs.get(generating);
      if (step !== undefined && promptTokens >= MIN_PROMPT_TOKENS) {
        this.promptTokenMs = average(this.promptTokenMs, Math.max(0, ms - step) / promptTokens);
      }
    }
    this.window.push(overBudget);
    if (overBudget) this.stretched++;
    if (this.window.length > STRETCH_WINDOW && this.window.shift() === true) this.stretched--;
  }

  /** A generation-only step's time at `generating` choices, or at the nearest count measured. */
  private generationStep(generating: number): number | undefined {
    const exact = this.generationMs.get(generating);
    if (exact !== undefined) return exact;
    let nearest: number | undefined;
    for (const count of this.generationMs.keys()) {
      if (nearest === undefined || Math.abs(count - generating) < Math.abs(nearest - generating))
        nearest = count;
    }
    return nearest === undefined ? undefined : this.generationMs.get(nearest);
  }
}

function average(current: number | undefined, sample: number): number {
  return current === undefined ? sample : current + ALPHA * (sample - current);
}
