// Expected tenancy failures as small named refusals; src/http/errors/domain-errors.ts maps them to HTTP statuses.
import { Refusal } from "../refusal.js";

/**
 * Base of every expected tenancy failure, so callers can tell them from bugs with one instanceof. Each is the
 * client's doing: a name, a key or a change the caller asked for that the tenancy refuses.
 */
export abstract class TenancyError extends Refusal {
  readonly fault = "client";
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

export class OrgNotFoundError extends TenancyError {
  constructor(readonly orgName: string) {
    super(`Organization "${orgName}" does not exist.`);
  }
}

export class DuplicateOrgError extends TenancyError {
  constructor(readonly orgName: string) {
    super(`Organization "${orgName}" already exists.`);
  }
}

export class KeyNotFoundError extends TenancyError {
  constructor(readonly keyId: string) {
    super(`API key "${keyId}" does not exist.`);
  }
}

/** A model id that is not in the server's configured models. */
export class UnknownModelIdError extends TenancyError {
  constructor(
    readonly modelId: string,
    readonly knownModelIds: readonly string[],
  ) {
    super(`Unknown model "${modelId}"; configured models: ${knownModelIds.join(", ") || "(none)"}.`);
  }
}

export class GrantNotFoundError extends TenancyError {
  constructor(
    readonly orgName: string,
    readonly modelId: string,
  ) {
    super(`Organization "${orgName}" has no grant for model "${modelId}".`);
  }
}

/** An input the service refuses, e.g. an org name that cannot appear in a URL; `field` names the input. */
export class TenancyValidationError extends TenancyError {
  constructor(
    message: string,
    readonly field: string,
  ) {
    super(message);
  }
}

export class DuplicateUserError extends TenancyError {
  constructor(readonly email: string) {
    super(`A user with email "${email}" already exists.`);
  }
}

/** A user who is not a member of the organization named (also: no such user). */
export class MemberNotFoundError extends TenancyError {
  constructor(
    readonly orgName: string,
    readonly userId: string,
  ) {
    super(`There is no member "${userId}" in organization "${orgName}".`);
  }
}

export class AlreadyMemberError extends TenancyError {
  constructor(
    readonly orgName: string,
    readonly email: string,
  ) {
    super(`${email} is already a member of organization "${orgName}".`);
  }
}

/** A change that would leave an organization without an owner, so nobody could manage its members. */
export class LastOwnerError extends TenancyError {
  constructor(readonly orgName: string) {
    super(`Organization "${orgName}" needs at least one owner: make someone else an owner first.`);
  }
}

/**
 * An invitation link that cannot be used: unknown, already used, withdrawn, superseded or expired. One error for
 * all of them, so a link says nothing about other invitations.
 */
export class InvitationNotFoundError extends TenancyError {
  constructor() {
    super(
      "This invitation link is not valid: it was already used, withdrawn or replaced, or it has expired.",
    );
  }
}

/** An invitation claimed as a new account for an email that has one: its holder signs in and accepts instead. */
export class AccountExistsError extends TenancyError {
  constructor(readonly email: string) {
    super(`There is already a Hearth account for ${email}: sign in to it to accept the invitation.`);
  }
}

/** A signed-in user's current password did not match (changing the password). */
export class WrongPasswordError extends TenancyError {
  constructor() {
    super("The current password is not correct.");
  }
}
