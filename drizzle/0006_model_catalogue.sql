CREATE TABLE "model_catalogue" (
	"id" text PRIMARY KEY NOT NULL,
	"config" jsonb,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
