//! Paginated lists during writes: the chaos namespace's ConfigMaps in small pages
//! (`limit`/`continue`), each complete list recorded for the consistency checker.

use crate::api;
use crate::history::ListRecord;
use crate::workloads::Ctx;

/// Items per page (small, so a list spans several pages).
const PAGE: u32 = 7;

/// One lister until the phase ends; lists that fail midway are dropped (a failed read has no
/// effect to check).
pub async fn run(mut ctx: Ctx, name: String) {
    while !ctx.pause(300, 1000).await {
        let client = ctx.any_client();
        let start = ctx.clock.now();
        let mut record = ListRecord {
            client: name.clone(),
            page_rvs: Vec::new(),
            items: Vec::new(),
            start,
        };
        let mut token = String::new();
        let complete = loop {
            match client.list_configmaps(PAGE, &token).await {
                Err(_) => break false,
                Ok(page) => {
                    record.page_rvs.push(page.resource_version.parse().unwrap_or(0));
                    record.items.extend(
                        page.items
                            .iter()
                            .map(|o| (api::name(o), api::resource_version(o))),
                    );
                    if page.continue_token.is_empty() {
                        break true;
                    }
                    token = page.continue_token;
                }
            }
        };
        if complete {
            ctx.recorder.lock().lists.push(record);
        }
    }
}
