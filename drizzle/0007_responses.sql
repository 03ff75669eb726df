CREATE TABLE "responses" (
	"id" text PRIMARY KEY NOT NULL,
	"org_id" text NOT NULL,
	"model" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"previous_response_id" text,
	"input_items" jsonb NOT NULL,
	"response" jsonb NOT NULL,
	"size" integer NOT NULL,
	"item_count" integer NOT NULL
);
--> statement-breakpoint
ALTER TABLE "usage_records" ADD COLUMN "endpoint" text DEFAULT 'chat.completions' NOT NULL;--> statement-breakpoint
ALTER TABLE "responses" ADD CONSTRAINT "responses_org_id_organizations_id_fk" FOREIGN KEY ("org_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "responses_org_id_idx" ON "responses" USING btree ("org_id","id");--> statement-breakpoint
CREATE INDEX "responses_expires_at_idx" ON "responses" USING btree ("expires_at");--> statement-breakpoint
ALTER TABLE "usage_records" ADD CONSTRAINT "usage_records_endpoint_check" CHECK ("usage_records"."endpoint" in ('chat.completions', 'responses'));