// drizzle-kit settings: `npx drizzle-kit generate` turns src/store/schema.ts into SQL migrations in drizzle/.
import { defineConfig } from "drizzle-kit";

export default defineConfig({
  dialect: "postgresql",
  schema: "./src/store/schema.ts",
  out: "./drizzle",
});
