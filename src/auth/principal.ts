// Who is calling: the API key's organization, set by the auth middleware on every /v1 request.

export interface Principal {
  orgId: string;
  orgName: string;
  keyId: string;
}
