//! [`TeamRepository`]: a tenant's members and invitations. Every change that must not half
//! happen is one transaction: an invitation with its mail job; an acceptance with the account,
//! the membership and the event; a role change or a removal with its event (and, for a
//! removal, the revocation of the member's keys in the tenant), under a lock of the tenant row
//! so that the last-owner rule holds between concurrent changes.

use agentry_domain::events::Event;
use agentry_domain::identity::Email;
use agentry_domain::ids::{InvitationId, TenantId, UserId};
use agentry_domain::jobs::NewJob;
use agentry_domain::secrets::SecretDigest;
use agentry_domain::team::{
    AcceptOutcome, Acceptance, Invitation, InvitationView, Member, MemberChange, TeamRepository,
    leaves_no_owner,
};
use agentry_domain::tenancy::{Automation, AutomationKind, Role};
use anyhow::Context as _;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::database::{Database, StoreError};
use crate::events::EventRow;
use crate::schema::{api_keys, events, invitations, jobs, memberships, tenants, users};
use crate::signals::WorkQueue;
use crate::types::{DbJsonAs, DbTime, parse_stored};

/// Members and invitations in the database.
#[derive(Debug, Clone)]
pub struct TeamStore {
    db: Database,
}

impl TeamStore {
    /// A repository over `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }

    pub(crate) fn db(&self) -> &Database {
        &self.db
    }
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = invitations, check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
struct InvitationRow {
    id: String,
    tenant_id: String,
    email: String,
    role: String,
    invited_by: String,
    created_at: DbTime,
    expires_at: DbTime,
    accepted_at: Option<DbTime>,
    revoked_at: Option<DbTime>,
}

impl InvitationRow {
    fn from_domain(i: &Invitation) -> Self {
        Self {
            id: i.id.to_string(),
            tenant_id: i.tenant_id.to_string(),
            email: i.email.as_str().to_owned(),
            role: i.role.as_str().to_owned(),
            invited_by: i.invited_by.to_string(),
            created_at: i.created_at.into(),
            expires_at: i.expires_at.into(),
            accepted_at: i.accepted_at.map(DbTime),
            revoked_at: i.revoked_at.map(DbTime),
        }
    }

    fn into_domain(self) -> anyhow::Result<Invitation> {
        Ok(Invitation {
            id: InvitationId::from_string(self.id),
            tenant_id: TenantId::from_string(self.tenant_id),
            email: Email::parse(&self.email).context("stored e-mail is invalid")?,
            role: parse_stored(&self.role, "role")?,
            invited_by: UserId::from_string(self.invited_by),
            created_at: self.created_at.0,
            expires_at: self.expires_at.0,
            accepted_at: self.accepted_at.map(|t| t.0),
            revoked_at: self.revoked_at.map(|t| t.0),
        })
    }
}

type ViewRow = (InvitationRow, String, String);

fn view((row, tenant_name, inviter_name): ViewRow) -> anyhow::Result<InvitationView> {
    Ok(InvitationView { invitation: row.into_domain()?, tenant_name, inviter_name })
}

type MemberRow = (String, String, String, String, DbTime);

fn member((user_id, email, full_name, role, joined_at): MemberRow) -> anyhow::Result<Member> {
    Ok(Member {
        user_id: UserId::from_string(user_id),
        email: Email::parse(&email).context("stored e-mail is invalid")?,
        full_name,
        role: parse_stored(&role, "role")?,
        joined_at: joined_at.0,
    })
}

/// Locks the tenant row until the transaction ends (a no-op write, which both databases hold
/// a lock for) and counts its owners: changes of one tenant's members are applied one at a
/// time, each seeing the owners the previous one left.
macro_rules! lock_and_count_owners {
    ($conn:expr, $tenant:expr, $now:expr) => {{
        diesel::update(tenants::table.filter(tenants::id.eq($tenant.as_str())))
            .set(tenants::updated_at.eq($now))
            .execute($conn)
            .await?;
        let owners: i64 = memberships::table
            .filter(memberships::tenant_id.eq($tenant.as_str()))
            .filter(memberships::role.eq(Role::Owner.as_str()))
            .count()
            .get_result($conn)
            .await?;
        Ok::<u64, StoreError>(u64::try_from(owners).unwrap_or(0))
    }};
}

/// The row of a membership change's event, listing what the change paused.
fn changed_event(event: &Event, paused: &[Automation]) -> Result<EventRow, StoreError> {
    let event = Event { payload: event.payload.clone().with_paused(paused.to_vec()), ..event.clone() };
    EventRow::from_domain(&event).map_err(|e| StoreError::Encode(e.to_string()))
}

/// The refusal a change's transaction rolls back with when it would leave no owner.
const LAST_OWNER: &str = "the change would leave the tenant without an owner";

fn member_change(result: Result<MemberChange, StoreError>) -> anyhow::Result<MemberChange> {
    match result {
        Ok(change) => Ok(change),
        Err(StoreError::Precondition(LAST_OWNER)) => Ok(MemberChange::LastOwner),
        Err(e) => Err(e.into()),
    }
}

#[async_trait]
impl TeamRepository for TeamStore {
    async fn members(&self, tenant: &TenantId) -> anyhow::Result<Vec<Member>> {
        let rows: Vec<MemberRow> = with_conn!(self.db, conn => memberships::table
            .inner_join(users::table)
            .filter(memberships::tenant_id.eq(tenant.as_str()))
            .order((memberships::created_at.asc(), memberships::user_id.asc()))
            .select((memberships::user_id, users::email, users::full_name, memberships::role, memberships::created_at))
            .load(conn)
            .await)?;
        rows.into_iter().map(member).collect()
    }

    async fn member(&self, tenant: &TenantId, user: &UserId) -> anyhow::Result<Option<Member>> {
        let row: Option<MemberRow> = with_conn!(self.db, conn => memberships::table
            .inner_join(users::table)
            .filter(memberships::tenant_id.eq(tenant.as_str()))
            .filter(memberships::user_id.eq(user.as_str()))
            .select((memberships::user_id, users::email, users::full_name, memberships::role, memberships::created_at))
            .first(conn)
            .await
            .optional())?;
        row.map(member).transpose()
    }

    async fn create_invitation(&self, invitation: &Invitation, mail: &NewJob) -> anyhow::Result<()> {
        let row = InvitationRow::from_domain(invitation);
        let job = mail.clone();
        transaction!(self.db, conn => {
            // A newer invitation of the same address replaces the pending one: its link dies.
            diesel::update(
                invitations::table
                    .filter(invitations::tenant_id.eq(row.tenant_id.as_str()))
                    .filter(invitations::email.eq(row.email.as_str()))
                    .filter(invitations::accepted_at.is_null())
                    .filter(invitations::revoked_at.is_null()),
            )
            .set(invitations::revoked_at.eq(row.created_at))
            .execute(conn)
            .await?;
            diesel::insert_into(invitations::table).values(&row).execute(conn).await?;
            diesel::insert_into(jobs::table)
                .values((
                    jobs::id.eq(job.id.as_str()),
                    jobs::kind.eq(job.kind.as_str()),
                    jobs::payload.eq(DbJsonAs(job.payload.clone())),
                    jobs::status.eq("queued"),
                    jobs::attempts.eq(0_i64),
                    jobs::run_at.eq(DbTime(job.run_at)),
                    jobs::created_at.eq(DbTime(job.created_at)),
                    jobs::updated_at.eq(DbTime(job.created_at)),
                ))
                .execute(conn)
                .await?;
            conn.announce(WorkQueue::Jobs).await?;
            Ok::<_, StoreError>(())
        })?;
        self.db.stored(WorkQueue::Jobs);
        Ok(())
    }

    async fn pending_invitations(
        &self,
        tenant: &TenantId,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Vec<Invitation>> {
        let rows: Vec<InvitationRow> = with_conn!(self.db, conn => invitations::table
            .filter(invitations::tenant_id.eq(tenant.as_str()))
            .filter(invitations::accepted_at.is_null())
            .filter(invitations::revoked_at.is_null())
            .filter(invitations::expires_at.gt(DbTime(now)))
            .order((invitations::created_at.desc(), invitations::id.desc()))
            .select(InvitationRow::as_select())
            .load(conn)
            .await)?;
        rows.into_iter().map(InvitationRow::into_domain).collect()
    }

    async fn revoke_invitation(
        &self,
        tenant: &TenantId,
        invitation: &InvitationId,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool> {
        let (tenant, invitation, now) = (tenant.clone(), invitation.clone(), DbTime(now));
        let n = transaction!(self.db, conn => Ok(diesel::update(
                invitations::table
                    .filter(invitations::tenant_id.eq(tenant.as_str()))
                    .filter(invitations::id.eq(invitation.as_str()))
                    .filter(invitations::accepted_at.is_null())
                    .filter(invitations::revoked_at.is_null())
                    .filter(invitations::expires_at.gt(now)),
            )
            .set(invitations::revoked_at.eq(now))
            .execute(conn)
            .await?))?;
        Ok(n == 1)
    }

    async fn invitation(&self, id: &InvitationId) -> anyhow::Result<Option<InvitationView>> {
        let row: Option<ViewRow> = with_conn!(self.db, conn => invitations::table
            .inner_join(tenants::table)
            .inner_join(users::table)
            .filter(invitations::id.eq(id.as_str()))
            .select((InvitationRow::as_select(), tenants::name, users::full_name))
            .first(conn)
            .await
            .optional())?;
        row.map(view).transpose()
    }

    async fn invitation_by_digest(&self, digest: &SecretDigest) -> anyhow::Result<Option<InvitationView>> {
        let row: Option<ViewRow> = with_conn!(self.db, conn => invitations::table
            .inner_join(tenants::table)
            .inner_join(users::table)
            .filter(invitations::token_digest.eq(digest.as_str()))
            .select((InvitationRow::as_select(), tenants::name, users::full_name))
            .first(conn)
            .await
            .optional())?;
        row.map(view).transpose()
    }

    async fn set_token(
        &self,
        invitation: &InvitationId,
        digest: &SecretDigest,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool> {
        let (invitation, digest, now) = (invitation.clone(), digest.clone(), DbTime(now));
        let n = transaction!(self.db, conn => Ok(diesel::update(
                invitations::table
                    .filter(invitations::id.eq(invitation.as_str()))
                    .filter(invitations::accepted_at.is_null())
                    .filter(invitations::revoked_at.is_null())
                    .filter(invitations::expires_at.gt(now)),
            )
            .set(invitations::token_digest.eq(digest.as_str()))
            .execute(conn)
            .await?))?;
        Ok(n == 1)
    }

    async fn accept(&self, acceptance: &Acceptance) -> anyhow::Result<AcceptOutcome> {
        let a = acceptance.clone();
        let event = EventRow::from_domain(&a.event)?;
        let result = transaction!(self.db, conn => {
            let now = DbTime(a.now);
            // One conditional UPDATE: of concurrent acceptances exactly one sees it pending.
            let spent = diesel::update(
                invitations::table
                    .filter(invitations::id.eq(a.invitation_id.as_str()))
                    .filter(invitations::token_digest.eq(a.digest.as_str()))
                    .filter(invitations::accepted_at.is_null())
                    .filter(invitations::revoked_at.is_null())
                    .filter(invitations::expires_at.gt(now)),
            )
            .set((invitations::accepted_at.eq(now), invitations::accepted_by.eq(a.user_id.as_str())))
            .execute(conn)
            .await?;
            if spent == 0 {
                return Ok(AcceptOutcome::NotUsable);
            }
            if let Some((user, hash)) = &a.new_user {
                diesel::insert_into(users::table)
                    .values((
                        users::id.eq(user.id.as_str()),
                        users::email.eq(user.email.as_str()),
                        users::full_name.eq(user.full_name.as_str()),
                        users::password_hash.eq(hash.as_str()),
                        users::is_active.eq(user.is_active),
                        users::created_at.eq(DbTime(user.created_at)),
                        users::updated_at.eq(DbTime(user.created_at)),
                    ))
                    .execute(conn)
                    .await?;
            }
            diesel::insert_into(memberships::table)
                .values((
                    memberships::tenant_id.eq(a.tenant_id.as_str()),
                    memberships::user_id.eq(a.user_id.as_str()),
                    memberships::role.eq(a.role.as_str()),
                    memberships::created_at.eq(now),
                ))
                .execute(conn)
                .await?;
            diesel::insert_into(events::table).values(&event).execute(conn).await?;
            Ok::<_, StoreError>(AcceptOutcome::Accepted)
        });
        match result {
            Ok(outcome) => {
                if outcome == AcceptOutcome::Accepted {
                    self.db.stored(WorkQueue::Outbox);
                }
                Ok(outcome)
            }
            Err(e) if e.is_unique_violation("users_email_unique", "users.email") => {
                Ok(AcceptOutcome::EmailTaken)
            }
            Err(e) if e.is_unique_violation("memberships_pkey", "memberships.tenant_id") => {
                Ok(AcceptOutcome::AlreadyMember)
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn change_role(
        &self,
        tenant: &TenantId,
        user: &UserId,
        from: Role,
        to: Role,
        event: &Event,
    ) -> anyhow::Result<MemberChange> {
        let (tenant, user, event) = (tenant.clone(), user.clone(), event.clone());
        let stopped = AutomationKind::lost_between(from, Some(to));
        let result = transaction!(self.db, conn => {
            let owners = lock_and_count_owners!(conn, tenant, DbTime(event.created_at))?;
            let changed = diesel::update(
                memberships::table
                    .filter(memberships::tenant_id.eq(tenant.as_str()))
                    .filter(memberships::user_id.eq(user.as_str()))
                    .filter(memberships::role.eq(from.as_str())),
            )
            .set(memberships::role.eq(to.as_str()))
            .execute(conn)
            .await?;
            if changed == 0 {
                return Ok(MemberChange::Gone);
            }
            if leaves_no_owner(owners, from, Some(to)) {
                return Err(StoreError::Precondition(LAST_OWNER));
            }
            let paused = automations_of!(conn, tenant.as_str(), Some(user.as_str()), &stopped)?;
            let row = changed_event(&event, &paused)?;
            diesel::insert_into(events::table).values(&row).execute(conn).await?;
            Ok(MemberChange::Done(paused))
        });
        let change = member_change(result)?;
        if matches!(change, MemberChange::Done(_)) {
            self.db.stored(WorkQueue::Outbox);
        }
        Ok(change)
    }

    async fn remove_member(
        &self,
        tenant: &TenantId,
        user: &UserId,
        from: Role,
        event: &Event,
        now: DateTime<Utc>,
    ) -> anyhow::Result<MemberChange> {
        let (tenant, user, now, event) = (tenant.clone(), user.clone(), DbTime(now), event.clone());
        let stopped = AutomationKind::lost_between(from, None);
        let result = transaction!(self.db, conn => {
            let owners = lock_and_count_owners!(conn, tenant, now)?;
            let removed = diesel::delete(
                memberships::table
                    .filter(memberships::tenant_id.eq(tenant.as_str()))
                    .filter(memberships::user_id.eq(user.as_str()))
                    .filter(memberships::role.eq(from.as_str())),
            )
            .execute(conn)
            .await?;
            if removed == 0 {
                return Ok(MemberChange::Gone);
            }
            if leaves_no_owner(owners, from, None) {
                return Err(StoreError::Precondition(LAST_OWNER));
            }
            // The keys die with the membership already (a key's grant joins it); revoking them
            // keeps them dead should the user be invited back.
            diesel::update(
                api_keys::table
                    .filter(api_keys::tenant_id.eq(tenant.as_str()))
                    .filter(api_keys::user_id.eq(user.as_str()))
                    .filter(api_keys::revoked_at.is_null()),
            )
            .set(api_keys::revoked_at.eq(now))
            .execute(conn)
            .await?;
            // What acted as them stops with this commit (each reads the membership when it
            // acts); the event and the answer list it.
            let paused = automations_of!(conn, tenant.as_str(), Some(user.as_str()), &stopped)?;
            let row = changed_event(&event, &paused)?;
            diesel::insert_into(events::table).values(&row).execute(conn).await?;
            Ok(MemberChange::Done(paused))
        });
        let change = member_change(result)?;
        if matches!(change, MemberChange::Done(_)) {
            self.db.stored(WorkQueue::Outbox);
        }
        Ok(change)
    }

    async fn automations<'a>(
        &self,
        tenant: &TenantId,
        user: Option<&'a UserId>,
    ) -> anyhow::Result<Vec<Automation>> {
        let (tenant, user) = (tenant.as_str(), user.map(UserId::as_str));
        Ok(with_conn!(self.db, conn => automations_of!(conn, tenant, user, &AutomationKind::ALL))?)
    }

    async fn take_over(
        &self,
        tenant: &TenantId,
        from: &UserId,
        to: &UserId,
        role: Role,
    ) -> anyhow::Result<Vec<Automation>> {
        let (tenant, from, to) = (tenant.to_string(), from.to_string(), to.clone());
        let taken = transaction!(self.db, conn => {
            let taken = automations_of!(conn, tenant.as_str(), Some(from.as_str()), &AutomationKind::ALL)?;
            take_over_automations!(conn, tenant.as_str(), from.as_str(), to.as_str(), role.as_str())?;
            Ok(taken.into_iter().map(|a| Automation { acts_as: Some(to.clone()), ..a }).collect::<Vec<_>>())
        })?;
        Ok(taken)
    }
}
