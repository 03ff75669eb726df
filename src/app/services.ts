// The typed services bag built once by main.ts and handed to createApp.
import type { HearthConfig } from "../config/schema.js";
import type { Engine } from "../engine/types.js";
import type { Logger } from "../observability/logger.js";
import type { TenancyService } from "../tenancy/tenancy-service.js";

export interface Services {
  config: HearthConfig;
  engine: Engine;
  tenancy: TenancyService;
  adminToken: string;
  logger: Logger;
  /** True once the store is open and migrated. */
  storeReady: () => boolean;
}
