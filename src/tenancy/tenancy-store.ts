// What the tenancy services share over the store: the transaction types and the org and grant lookups.
import { asc, eq } from "drizzle-orm";
import type { StoreDb } from "../store/open-store.js";
import { modelGrants, type OrganizationRow, organizations } from "../store/schema.js";
import { OrgNotFoundError } from "./errors.js";
import type { Org } from "./types.js";

/** An open transaction of the store. */
export type StoreTx = Parameters<Parameters<StoreDb["transaction"]>[0]>[0];
/** The store itself or an open transaction: lookups run in either. */
export type Executor = StoreDb | StoreTx;
/** The part of an org row that rows written for it need. */
export type OrgRef = Pick<OrganizationRow, "id" | "name">;

export async function findOrgRow(exec: Executor, name: string): Promise<OrganizationRow | undefined> {
  const rows = await exec.select().from(organizations).where(eq(organizations.name, name)).limit(1);
  return rows[0];
}

export async function requireOrgRow(exec: Executor, name: string): Promise<OrganizationRow> {
  const row = await findOrgRow(exec, name);
  if (row === undefined) throw new OrgNotFoundError(name);
  return row;
}

/** The org's granted model ids, sorted. */
export async function grantedModels(exec: Executor, orgId: string): Promise<string[]> {
  const rows = await exec
    .select({ modelId: modelGrants.modelId })
    .from(modelGrants)
    .where(eq(modelGrants.orgId, orgId))
    .orderBy(asc(modelGrants.modelId));
  return rows.map((r) => r.modelId);
}

export function toOrg(row: OrganizationRow, models: string[]): Org {
  return { id: row.id, name: row.name, createdAt: row.createdAt, rpm: row.rpm, tpm: row.tpm, models };
}
