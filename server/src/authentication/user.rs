//! Who made a request: the user info every authenticator produces and every authorizer, audit
//! record and admission plugin reads, with the well-known names kube-apiserver gives to the
//! anonymous user and to its built-in groups.

use std::collections::BTreeMap;

/// The group every authenticated user is in.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group of a request that presented no credentials.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The user name of a request that presented no credentials.
pub const ANONYMOUS: &str = "system:anonymous";
/// The group whose members may do anything, whatever RBAC says.
pub const SYSTEM_MASTERS: &str = "system:masters";
/// The group of every ServiceAccount.
pub const SERVICE_ACCOUNTS: &str = "system:serviceaccounts";
/// The prefix of a ServiceAccount's user name: `system:serviceaccount:NAMESPACE:NAME`.
pub const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// The identity a request is made as (kube's `user.Info`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// The user name (`alice`, `system:serviceaccount:shop:default`, `system:anonymous`).
    pub name: String,
    /// A unique id, when the authenticator knows one.
    pub uid: String,
    /// The groups, including `system:authenticated` or `system:unauthenticated`.
    pub groups: Vec<String>,
    /// Further facts the authenticator attaches (a ServiceAccount token's pod name, ...).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// The anonymous user: `system:anonymous` in `system:unauthenticated`.
    pub fn anonymous() -> UserInfo {
        UserInfo {
            name: ANONYMOUS.into(),
            groups: vec![UNAUTHENTICATED.into()],
            ..UserInfo::default()
        }
    }

    /// Whether the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// The ServiceAccount's (namespace, name) when the user is one.
    pub fn service_account(&self) -> Option<(&str, &str)> {
        self.name.strip_prefix(SERVICE_ACCOUNT_PREFIX)?.split_once(':')
    }
}
