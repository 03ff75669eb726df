// The process logger (pino, JSON lines). Secrets never reach it: auth headers and keys are redacted.
import { type Logger, pino } from "pino";

export type { Logger };

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: "hearth" },
      redact: {
        paths: [
          "req.headers.authorization",
          "headers.authorization",
          "authorization",
          "key",
          "apiKey",
          "token",
        ],
        censor: "[redacted]",
      },
    },
    destination,
  );
}
