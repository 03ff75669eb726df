// POST /v1/responses: the Responses API as a second front end over the completions service: parse (into the chat
// request) → the same service → one response object or typed SSE events; stored per organization when asked.

import { performance } from "node:perf_hooks";
import type { Context } from "hono";
import type { CompletionsService } from "../../completions/completions-service.js";
import type { ResponsesConfig } from "../../config/responses-settings.js";
import type { ModelInfo } from "../../engine/types.js";
import { faultCause } from "../../observability/fault-cause.js";
import type { Logger } from "../../observability/logger.js";
import type { Metrics } from "../../observability/metrics.js";
import type { ResponseItem, ResponsesStore, StoredResponse } from "../../responses/types.js";
import { newObjectId } from "../../store/ids.js";
import { arrivalOf } from "../arrivals.js";
import type { AppEnv } from "../env.js";
import { ApiError, InvalidRequestError } from "../errors/api-error.js";
import { domainApiError } from "../errors/domain-errors.js";
import { generationStreamResponse, streamErrorFrame } from "../generation-stream.js";
import { clientLeftSignal, readBodyText } from "../node-request.js";
import {
  collectOutput,
  finalStatus,
  type ResponseMeta,
  type ResponseObject,
  type ResponseState,
  responseObject,
} from "../openai/responses/body.js";
import {
  type InputItem,
  inputItemSchema,
  type ResolvedItem,
  storedInputItems,
} from "../openai/responses/input-items.js";
import { outputItemPlace } from "../openai/responses/output.js";
import {
  chatFieldParam,
  type ParsedResponsesRequest,
  type ParseResponsesOptions,
  parseResponsesBody,
  parseResponsesRequest,
  renamed,
} from "../openai/responses/request.js";
import { streamResponse } from "../openai/responses/stream.js";
import { rateLimitHeaders } from "../rate-limit-headers.js";
import { sessionIdOf } from "../session-id.js";
import { parseJsonBody } from "../validation.js";
import type { ChatCompletionsDeps } from "./v1-chat-completions.js";

export interface ResponsesDeps {
  completions: CompletionsService;
  logger: Logger;
  metrics?: Pick<Metrics, "structuredOutputInvalid">;
  /** The chat route's bounds, and hearth.yaml's `responses:` (retention, input and chain bounds). */
  limits: ChatCompletionsDeps["limits"] & { responses: ResponsesConfig };
  /** The served models: their sampling defaults are echoed where the request left temperature or top_p out. */
  models: () => ModelInfo[];
  /** Stored responses; absent: nothing is stored (`store` answers false, `previous_response_id` finds nothing). */
  store?: ResponsesStore | undefined;
}

export async function createResponse(c: Context<AppEnv>, deps: ResponsesDeps): Promise<Response> {
  const startedAt = performance.now();
  const requestId = c.get("requestId");
  const principal = c.get("principal");
  const left = new AbortController();
  const signal = clientLeftSignal(c, left);
  const options: ParseResponsesOptions = {
    maxN: 1,
    requestLimits: deps.limits.requestLimits,
    responses: deps.limits.responses,
    ...(deps.limits.schemaBudget === undefined ? {} : { schemaBudget: deps.limits.schemaBudget }),
  };
  const read = async (): Promise<ParsedResponsesRequest> => {
    const text = await readBodyText(c, deps.limits.maxBodyBytes);
    const body = parseResponsesBody(parseJsonBody(text), options);
    c.set("model", body.body.model);
    const previous = body.body.previous_response_id;
    const history = previous === undefined ? [] : await conversation(deps, principal.orgId, previous);
    const items = await resolveReferences(deps, principal.orgId, body.items);
    const request = parseResponsesRequest({ body: body.body, items }, history, options);
    const sessionId = sessionIdOf(c);
    return sessionId === undefined ? request : { ...request, sessionId };
  };
  let started: Awaited<ReturnType<CompletionsService["start"]>> & { request: ParsedResponsesRequest };
  try {
    started = await deps.completions.start(read, {
      principal,
      requestId,
      startedAt,
      signal,
      endpoint: "responses",
      arrived: arrivalOf(c),
    });
  } catch (err) {
    // The engine's refusals name chat fields (`messages` for a prompt over the context): named as sent here.
    const known = domainApiError(err) ?? err;
    throw renamed(known, (param) => (param === "messages" ? "input" : chatFieldParam(param)));
  }
  const { generation, rateLimit, request } = started;
  const { body, items } = request.responses;
  const model = deps.models().find((m) => m.id === request.model);
  const meta: ResponseMeta = {
    id: newObjectId("response"),
    createdAt: Math.floor(Date.now() / 1000),
    model: request.model,
    store: false,
    temperature: model?.defaults?.temperature ?? 1,
    topP: model?.defaults?.top_p ?? 1,
  };
  const render = (state: ResponseState, stored = false) =>
    responseObject(body, { ...meta, store: stored }, state);
  const onInvalid = (invalid: string) => {
    deps.logger.warn({ requestId, invalid }, "structured output failed validation");
    deps.metrics?.structuredOutputInvalid(request.model);
  };
  // Stores the ended response when asked; a store that fails costs the storing, never the reply or its usage.
  const end = async (state: ResponseState): Promise<ResponseObject> => {
    const store = deps.store;
    if (body.store === false || store === undefined || signal.aborted) return render(state);
    const stored = render(state, true);
    try {
      const createdAt = new Date(meta.createdAt * 1000);
      await store.save({
        id: meta.id,
        orgId: principal.orgId,
        model: request.model,
        createdAt,
        expiresAt: new Date(createdAt.getTime() + deps.limits.responses.retention),
        previousResponseId: body.previous_response_id,
        inputItems: storedInputItems(items),
        response: stored as unknown as ResponseObject & { output: ResponseItem[] },
      });
      return stored;
    } catch (err) {
      deps.logger.warn(
        { requestId, responseId: meta.id, ...faultCause(err) },
        "storing the response failed: answered with store false",
      );
      return render(state);
    }
  };
  const headers = rateLimitHeaders(rateLimit);

  if (!request.stream) {
    const output = await collectOutput(generation, meta.id, onInvalid);
    const response = await end({ status: finalStatus(output), output: output.items, usage: output.usage });
    return c.json(response, 200, headers);
  }
  return generationStreamResponse(
    c,
    (writer) =>
      streamResponse(writer, generation.events, {
        responseId: meta.id,
        render,
        onInvalid,
        onEnd: end,
        onError: streamErrorFrame(deps.logger, requestId),
      }),
    {
      logger: deps.logger,
      requestId,
      left,
      drainTimeoutMs: deps.limits.sseDrainTimeoutMs,
      keepAliveMs: deps.limits.keepAliveMs,
      headers,
    },
  );
}

/** A 404 naming a field, as OpenAI answers for a stored object that is not there. */
function notFound(message: string, param: string): ApiError {
  return new ApiError("not_found", message, { param });
}

/**
 * Each `item_reference` replaced by the stored output item it names. An output item's id names its response
 * (outputItemPlace), so one read per referenced response finds it; responses read are bounded by the chain's
 * `maxResponses`. An id that is not the organization's is a 404 like an unknown one.
 */
async function resolveReferences(
  deps: ResponsesDeps,
  orgId: string,
  items: InputItem[],
): Promise<ResolvedItem[]> {
  const read = new Map<string, Promise<StoredResponse | undefined>>();
  const resolved: ResolvedItem[] = [];
  for (const [index, item] of items.entries()) {
    if (item.type !== "item_reference") {
      resolved.push(item);
      continue;
    }
    const place = outputItemPlace(item.id);
    let found: ResponseItem | undefined;
    if (place !== undefined && deps.store !== undefined) {
      let response = read.get(place.responseId);
      if (response === undefined) {
        const bound = deps.limits.responses.chain.maxResponses;
        if (read.size >= bound) {
          throw new InvalidRequestError(
            `Invalid 'input': its item references name more than ${bound} responses.`,
            `input[${index}].id`,
          );
        }
        response = deps.store.get(orgId, place.responseId);
        read.set(place.responseId, response);
      }
      const candidate = (await response)?.response.output[place.index];
      if (candidate?.id === item.id) found = candidate;
    }
    if (found === undefined) throw notFound(`Item with id '${item.id}' not found.`, `input[${index}].id`);
    // A stored output item is a message, function call or reasoning item: never a reference.
    resolved.push(inputItemSchema.parse(found) as ResolvedItem);
  }
  return resolved;
}

/**
 * The conversation `previous_response_id` continues, as input items. Another organization's id is answered
 * exactly like an unknown one (no existence oracle).
 */
async function conversation(deps: ResponsesDeps, orgId: string, id: string): Promise<ResolvedItem[]> {
  // Past a chain bound: ResponseChainTooLargeError, a 400 naming previous_response_id (the one error map).
  const items = await deps.store?.conversation(orgId, id, deps.limits.responses.chain);
  if (items === undefined) {
    throw notFound(`Previous response with id '${id}' not found.`, "previous_response_id");
  }
  // Stored items are what this route stored (references resolved): one that does not parse is a bug (a 500).
  return items.map((item) => inputItemSchema.parse(item) as ResolvedItem);
}
