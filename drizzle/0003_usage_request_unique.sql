-- A record written twice before this index existed (a retried write whose first answer was lost) is kept once.
DELETE FROM "usage_records" a USING "usage_records" b WHERE a."org_id" = b."org_id" AND a."request_id" = b."request_id" AND a."id" > b."id";--> statement-breakpoint
CREATE UNIQUE INDEX "usage_records_org_request_idx" ON "usage_records" USING btree ("org_id","request_id");
