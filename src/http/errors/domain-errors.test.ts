// The one domain→HTTP map: every expected failure's status, code and param, and the registry it draws codes from.
import { describe, expect, it } from "vitest";
import { JsonSchemaError } from "../../chat/schema/json-schema.js";
import { TemplateError } from "../../chat/template/render.js";
import { RenderQueueFullError } from "../../chat/template/thread.js";
import {
  ContextOverflowError,
  EngineNotReadyError,
  QueueFullError,
  QueueTimeoutError,
  RequestAbortedError,
  TooManyChoicesError,
  UnknownModelError,
} from "../../engine/errors.js";
import { EngineDisposedError, FirstTokenTimeoutError } from "../../engine/upstream/upstream-call.js";
import { UpstreamError, UpstreamProtocolError } from "../../engine/upstream/upstream-error.js";
import { RateLimitRefusal, type RateLimitRefusalFacts } from "../../limits/rate-limit-refusal.js";
import { isClientsDoing, Refusal } from "../../refusal.js";
import { ResponseChainTooLargeError } from "../../responses/types.js";
import { StoreUnavailableError } from "../../store/store-status.js";
import {
  AlreadyMemberError,
  DuplicateOrgError,
  DuplicateUserError,
  GrantNotFoundError,
  KeyNotFoundError,
  LastOwnerError,
  MemberNotFoundError,
  OrgNotFoundError,
  TenancyValidationError,
  UnknownModelIdError,
} from "../../tenancy/errors.js";
import {
  AdminAuthError,
  type ApiError,
  AuthThrottledError,
  ClientClosedRequestError,
  ConflictError,
  ContextLengthError,
  EngineOverloadedError,
  InternalServerError,
  InvalidApiKeyError,
  InvalidRequestError,
  MethodNotAllowedError,
  MetricsAuthError,
  ModelNotFoundError,
  NotFoundError,
  NotReadyError,
  PayloadTooLargeError,
  RateLimitError,
} from "./api-error.js";
import { domainApiError, mapDomainError } from "./domain-errors.js";
import { ERROR_CODES, ERROR_TYPES } from "./error-codes.js";

describe("domainApiError", () => {
  it.each<[string, unknown, number, string, string | null]>([
    ["context overflow", new ContextOverflowError(100, 90, 20), 400, "context_length_exceeded", "messages"],
    ["a full queue", new QueueFullError("m"), 503, "engine_overloaded", null],
    ["a full template thread", new RenderQueueFullError(64), 503, "engine_overloaded", null],
    ["a queue timeout", new QueueTimeoutError("m", 50), 503, "engine_overloaded", null],
    ["a client that left", new RequestAbortedError("m"), 499, "client_closed_request", null],
    ["an unknown model", new UnknownModelError("m"), 404, "model_not_found", "model"],
    ["an engine still loading", new EngineNotReadyError("m"), 503, "engine_overloaded", null],
    [
      "an upstream model without a healthy endpoint",
      new EngineNotReadyError("m", "no healthy endpoint"),
      503,
      "engine_overloaded",
      null,
    ],
    ["too many choices", new TooManyChoicesError(9, 4), 400, "invalid_request_error", "n"],
    [
      "an upstream's 400",
      new UpstreamError("bad stop", 400, false, true),
      400,
      "invalid_request_error",
      null,
    ],
    [
      "an upstream's 400 naming its param",
      new UpstreamError("bad bias", 400, false, true, "bad bias", "logit_bias"),
      400,
      "invalid_request_error",
      "logit_bias",
    ],
    [
      "an upstream failing mid-stream",
      new UpstreamError("x", 502, true, false),
      503,
      "engine_overloaded",
      null,
    ],
    ["an upstream breaking the protocol", new UpstreamProtocolError("x"), 503, "engine_overloaded", null],
    ["a template refusal", new TemplateError("raised", "roles"), 400, "invalid_request_error", "messages"],
    ["a schema", new JsonSchemaError("no", "#"), 400, "invalid_request_error", "response_format"],
    ["an unknown org", new OrgNotFoundError("o"), 404, "org_not_found", null],
    ["an unknown key", new KeyNotFoundError("k"), 404, "key_not_found", null],
    ["a missing grant", new GrantNotFoundError("o", "m"), 404, "grant_not_found", null],
    ["an unknown member", new MemberNotFoundError("o", "u"), 404, "member_not_found", null],
    ["a duplicate org", new DuplicateOrgError("o"), 409, "conflict", null],
    ["a duplicate user", new DuplicateUserError("a@b.c"), 409, "conflict", null],
    ["a duplicate member", new AlreadyMemberError("o", "a@b.c"), 409, "conflict", null],
    ["the last owner", new LastOwnerError("o"), 409, "last_owner", null],
    ["an unknown model id", new UnknownModelIdError("x", ["m"]), 400, "unknown_model", "model"],
    ["a refused input", new TenancyValidationError("bad", "email"), 400, "invalid_request_error", "email"],
    [
      "a previous_response_id chain past a bound",
      new ResponseChainTooLargeError("maxItems", 10),
      400,
      "invalid_request_error",
      "previous_response_id",
    ],
    [
      "an upstream that never sent a first token",
      new FirstTokenTimeoutError(10),
      503,
      "engine_overloaded",
      null,
    ],
    ["an engine shutting down", new EngineDisposedError(), 503, "engine_overloaded", null],
    ["a store that is down", new StoreUnavailableError(), 503, "store_unavailable", null],
    ["a template that does not parse", new TemplateError("syntax", "x"), 500, "server_error", null],
    ["a spent requests window", rateLimited(), 429, "rate_limit_exceeded", null],
  ])("maps %s", (_, err, status, code, param) => {
    const apiError = mapDomainError(err);
    expect(apiError).toMatchObject({ status, code, param });
    // The refusal says whose doing it was, and its status agrees: a 4xx is the client's, a 5xx the server's.
    expect(err).toBeInstanceOf(Refusal);
    expect((err as Refusal).fault).toBe(status < 500 ? "client" : "server");
    expect(isClientsDoing(err)).toBe(status < 500);
  });

  it("makes a spent window OpenAI's 429: its words, the retry hint, retry-after and the x-ratelimit-* headers", () => {
    const apiError = domainApiError(rateLimited());
    expect(apiError).toBeInstanceOf(RateLimitError);
    expect(apiError?.toBody()).toEqual({
      error: {
        message:
          "Rate limit reached for requests per min (RPM) in organization acme: Limit 3, Used 3, Requested 1. " +
          "Please try again in 1.5s.",
        type: "requests",
        param: null,
        code: "rate_limit_exceeded",
      },
    });
    expect(apiError?.headers).toEqual({
      "x-ratelimit-limit-requests": "3",
      "x-ratelimit-remaining-requests": "0",
      "x-ratelimit-reset-requests": "1.5s",
      "x-ratelimit-limit-tokens": "1000",
      "x-ratelimit-remaining-tokens": "990",
      "x-ratelimit-reset-tokens": "30s",
      "retry-after": "2",
      "retry-after-ms": "1500",
    });
  });

  it("makes a request larger than the whole TPM window a 429 that says waiting will not help", () => {
    const apiError = domainApiError(
      rateLimited({ kind: "tokens", reason: "too_large", limit: 100, requested: 500, retryAfterMs: 60_000 }),
    );
    expect(apiError).toMatchObject({
      status: 429,
      type: "tokens",
      message:
        "Request too large for tokens per min (TPM) in organization acme: Limit 100, Requested 500. The input or " +
        "output tokens must be reduced in order to run successfully.",
    });
    expect(apiError?.headers).toMatchObject({
      "retry-after": "60",
      "retry-after-ms": "60000",
      "x-should-retry": "false",
    });
  });

  it("keeps the domain's words", () => {
    expect(domainApiError(new OrgNotFoundError("o"))?.message).toBe('Organization "o" does not exist.');
    expect(domainApiError(new QueueTimeoutError("m", 50))?.message).toMatch(/waited 50 ms/);
    expect(domainApiError(new TemplateError("raised", "roles"))?.message).toBe(
      "The model's chat template rejected the messages: roles",
    );
    expect(domainApiError(new UnknownModelIdError("", ["m"]))?.message).toBe("Choose a model first.");
  });

  it("takes the route's param from the hints", () => {
    expect(domainApiError(new UnknownModelIdError("x", []), { param: "models" })?.param).toBe("models");
    const schema = domainApiError(new JsonSchemaError("'minimum' is not supported", "#/properties/n"), {
      param: "tools[0].function.parameters",
    });
    expect(schema).toMatchObject({
      param: "tools[0].function.parameters",
      message:
        "Invalid schema for 'tools[0].function.parameters': 'minimum' is not supported (#/properties/n)",
    });
  });

  it("leaves bugs, a template that does not parse and ApiErrors alone", () => {
    expect(domainApiError(new TypeError("x"))).toBeUndefined();
    expect(domainApiError(new TemplateError("syntax", "x"))).toBeUndefined();
    expect(domainApiError(new NotFoundError("x"))).toBeUndefined();
    expect(domainApiError("a string")).toBeUndefined();
  });
});

/** A refusal of the requests window as the limiter throws it (the snapshot is of the moment of refusal). */
function rateLimited(facts: Partial<RateLimitRefusalFacts> = {}): RateLimitRefusal {
  return new RateLimitRefusal({
    kind: "requests",
    reason: "exhausted",
    orgName: "acme",
    limit: 3,
    used: 3,
    requested: 1,
    retryAfterMs: 1500,
    snapshot: {
      requests: { limit: 3, remaining: 0, resetMs: 1500 },
      tokens: { limit: 1000, remaining: 990, resetMs: 30_000 },
    },
    ...facts,
  });
}

describe("mapDomainError", () => {
  it("passes an ApiError through, maps a domain failure and makes anything else a generic 500", () => {
    const apiError = new ConflictError("x");
    expect(mapDomainError(apiError)).toBe(apiError);
    expect(mapDomainError(new OrgNotFoundError("o")).code).toBe("org_not_found");
    const bug = new TypeError("secret detail");
    const mapped = mapDomainError(bug);
    expect(mapped).toMatchObject({ status: 500, code: "server_error", cause: bug });
    expect(mapped.message).not.toContain("secret detail");
  });
});

describe("the error-code registry", () => {
  it("sends every ApiError with its code's status and type (a 429's type: its window)", () => {
    const errors: ApiError[] = [
      new InvalidRequestError("x"),
      new ContextLengthError("x"),
      new InvalidApiKeyError(),
      new AdminAuthError(),
      new MetricsAuthError(),
      new AuthThrottledError("x", 1000),
      new ModelNotFoundError("m"),
      new NotFoundError("x"),
      new NotFoundError("x", "unknown_url"),
      new ConflictError("x"),
      new PayloadTooLargeError(1),
      new MethodNotAllowedError("PUT", "/v1"),
      new RateLimitError("tokens", "x", { retryAfterMs: 10 }),
      new RateLimitError("requests", "x", { retryAfterMs: 10 }),
      new EngineOverloadedError(),
      new ClientClosedRequestError(),
      new NotReadyError(),
      new InternalServerError(),
      ...[new OrgNotFoundError("o"), new LastOwnerError("o"), new UnknownModelIdError("x", [])].map((err) =>
        mapDomainError(err),
      ),
    ];
    for (const apiError of errors) {
      expect(apiError.code, apiError.name).not.toBeNull();
      if (apiError.code !== null) {
        expect(apiError.status, apiError.code).toBe(ERROR_CODES[apiError.code].status);
        if (!(apiError instanceof RateLimitError))
          expect(apiError.type).toBe(ERROR_CODES[apiError.code].type);
      }
      expect(ERROR_TYPES).toContain(apiError.type);
      expect(apiError.fault).toBe(apiError.status < 500 ? "client" : "server");
    }
  });

  it("is frozen", () => {
    expect(Object.isFrozen(ERROR_CODES)).toBe(true);
    expect(Object.isFrozen(ERROR_TYPES)).toBe(true);
  });
});
