// How the library builds each llama_decode batch (ascending sequence id), and the decode counters it feeds.
import type { BatchItem, CustomBatchingPrioritizationStrategy, EvaluationPriority } from "node-llama-cpp";

/** Counters the tests and the benchmark read: tokens per llama_decode is the batching proof. */
export interface RunnerStats {
  /** llama_decode calls and the tokens they carried, prompts included. */
  decodes: number;
  decodedTokens: number;
  /**
   * Runs of consecutive sequence ids, summed over the decodes: llama.cpp splits a batch of streams that are not
   * unified into one ubatch per run (`split_equal`), each a pass over the weights. One per decode is the best.
   */
  sequenceRuns: number;
  /** llama_decode calls the step loop made itself (direct steps: greedy draws on the tuned build). */
  directDecodes: number;
  /** Of those, the ones run on the JS thread (`blockingDecodeMs`). */
  decodesHere: number;
  steps: number;
  /** Steps that started jobs (their first token drawn), and the jobs they started. */
  startSteps: number;
  startedJobs: number;
  /** Steps that only generated (no prompt work): their token count, the decodes and the runs they took. */
  generationSteps: number;
  generationStepTokens: number;
  generationStepDecodes: number;
  generationStepRuns: number;
}

export function createRunnerStats(): RunnerStats {
  return {
    decodes: 0,
    decodedTokens: 0,
    sequenceRuns: 0,
    directDecodes: 0,
    decodesHere: 0,
    steps: 0,
    startSteps: 0,
    startedJobs: 0,
    generationSteps: 0,
    generationStepTokens: 0,
    generationStepDecodes: 0,
    generationStepRuns: 0,
  };
}

/** The sequence whose work has this priority (`priorityOf`'s inverse). */
export function sequenceOf(priority: EvaluationPriority): number {
  return PRIORITY_BASE - priority;
}

/** Runs of consecutive numbers in ascending `ids` (3, 4, 5, 9: two). */
export function runsOf(ids: readonly number[]): number {
  let runs = 0;
  for (let i = 0; i < ids.length; i++) if (i === 0 || ids[i] !== (ids[i - 1] as number) + 1) runs++;
  return runs;
}

/** Priority order of the library's batch builder = ascending sequence id, so llama.cpp keeps one ubatch. */
const PRIORITY_BASE = 1_000_000;

/** The evaluation priority of a sequence's work: higher for lower ids. */
export function priorityOf(sequenceId: number): EvaluationPriority {
  // The library types priority as 1..5 but only compares numbers; our batch strategy sorts by it.
  return (PRIORITY_BASE - sequenceId) as EvaluationPriority;
}

/**
 * The library's batch builder with one change: items in descending priority (= ascending sequence id) so
 * llama.cpp's split_equal keeps the whole step in one ubatch.
 */
export const sequenceOrderStrategy: CustomBatchingPrioritizationStrategy = ({ items, size }) => {
  const ordered = [...items].sort((a, b) => b.evaluationPriority - a.evaluationPriority);
  const result: { item: BatchItem; processAmount: number }[] = [];
  let left = size;
  for (const item of ordered) {
    if (left <= 0) break;
    const processAmount = Math.min(item.tokens.length, left);
    result.push({ item, processAmount });
    left -= processAmount;
  }
  return result;
};

/** Counts one llama_decode of `tokens` tokens for the sequences `sequenceIds` (ascending). */
export function countDecode(stats: RunnerStats, tokens: number, sequenceIds: readonly number[]): void {
  stats.decodes++;
  stats.decodedTokens += tokens;
  stats.sequenceRuns += runsOf(sequenceIds);
}

/**
 * `sequenceOrderStrategy` that also counts decodes in `stats`. The library asks its strategy once per batch it
 * builds and runs one llama_decode per batch that holds tokens; the batch's size is the sum of the amounts the
 * strategy returns (each already capped by the item's tokens and the room left, as the library caps them).
 */
export function countingStrategy(
  stats: RunnerStats,
  /** Told each batch's token count just before its llama_decode (see `decodeThreads`). */
  onBatch?: (tokens: number) => void,
): CustomBatchingPrioritizationStrategy {
  return (options) => {
    const batch = sequenceOrderStrategy(options);
    const tokens = batch.reduce((sum, { processAmount }) => sum + processAmount, 0);
    if (tokens > 0) {
      // The batch is in ascending sequence id already.
      const ids = batch.filter((b) => b.processAmount > 0).map((b) => sequenceOf(b.item.evaluationPriority));
      countDecode(stats, tokens, ids);
      onBatch?.(tokens);
    }
    return batch;
  };
}

/**
 * llama.cpp threads for a decode of `tokens` tokens, with `threads` configured on `cores` cores. A decode of one
 * token (one stream generating) leaves a core to Node's main thread when the threads take them all: its work
 * between steps (sampling, detokenizing, the stream's writes) otherwise preempts a compute thread that the others
 * then wait for at every barrier. Measured at one stream on 2 vCPUs (AMD EPYC, SmolLM2): 2 threads 80–82 tok/s,
 * ITL p95 28 ms; 1 thread 104–110 tok/s, ITL p95 11–12 ms. Larger batches keep every thread (16 streams: 2 threads
 * 266–280 tok/s, 1 thread 147–166). With a persistent thread pool (the tuned build) the rule does not apply: the
 * pool's threads wait for work instead of being created per decode, and every decode takes them all.
 */
export function decodeThreads(tokens: number, threads: number, cores: number, pooled = false): number {
  return !pooled && tokens <= 1 && threads > 1 && threads >= cores ? threads - 1 : threads;
}
