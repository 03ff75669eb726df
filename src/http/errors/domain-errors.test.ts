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
import { UpstreamError, UpstreamProtocolError } from "../../engine/upstream/upstream-error.js";
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
  ])("maps %s", (_, err, status, code, param) => {
    const apiError = domainApiError(err);
    expect(apiError).toMatchObject({ status, code, param });
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
  it("sends every ApiError with its code's status and a registered type", () => {
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
      if (apiError.code !== null) expect(apiError.status, apiError.code).toBe(ERROR_CODES[apiError.code]);
      expect(ERROR_TYPES).toContain(apiError.type);
    }
  });

  it("is frozen", () => {
    expect(Object.isFrozen(ERROR_CODES)).toBe(true);
    expect(Object.isFrozen(ERROR_TYPES)).toBe(true);
  });
});
