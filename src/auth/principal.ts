// Who is calling: the API key's organization, set by the auth middleware on every /v1 request.

export interface Principal {
  orgId: string;
  orgName: string;
  keyId: string;
  /** The organization's requests and tokens per minute; null = unlimited. Seen by other replicas within the key cache TTL. */
  rpm: number | null;
  tpm: number | null;
}
