//! Content negotiation: the one place that reads `Accept` and picks the representation of a
//! response, for resources, discovery and OpenAPI alike.

use axum::http::HeaderMap;

use crate::machinery::errors::{ApiError, ApiResult};

/// The representation a client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `application/json`
    Json,
    /// `application/yaml`
    Yaml,
    /// `application/vnd.kubernetes.protobuf`
    Protobuf,
    /// `application/cbor` (watches: `application/cbor-seq`)
    Cbor,
    /// `application/json;as=Table;g=meta.k8s.io;v=v1|v1beta1`, carrying the version.
    Table(&'static str),
    /// `application/json;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1|v1beta1`: only the
    /// objects' metadata, carrying the version.
    Metadata(&'static str),
    /// `application/json;as=APIGroupDiscoveryList;g=apidiscovery.k8s.io;v=v2|v2beta1`: all
    /// groups, versions and resources in one document, carrying the version.
    AggregatedDiscovery(&'static str),
}

/// Which representations an endpoint has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// Objects and lists: JSON, YAML, protobuf, CBOR, Table and PartialObjectMetadata.
    Resource,
    /// `/api` and `/apis`: JSON, YAML, protobuf, CBOR and aggregated discovery.
    GroupList,
    /// The other discovery documents: JSON, YAML, protobuf and CBOR.
    Discovery,
}

/// One entry of an `Accept` header.
struct MediaRange {
    media: String,
    as_kind: Option<String>,
    group: Option<String>,
    version: Option<String>,
    /// The quality, 0 to 1 (`q=`; 1 when absent or unreadable).
    q: f32,
}

impl MediaRange {
    fn parse(range: &str) -> MediaRange {
        let mut parts = range.split(';').map(str::trim);
        let mut r = MediaRange {
            media: parts.next().unwrap_or("").to_ascii_lowercase(),
            as_kind: None,
            group: None,
            version: None,
            q: 1.0,
        };
        for p in parts {
            if let Some((k, v)) = p.split_once('=') {
                let v = v.trim().to_string();
                match k.trim() {
                    "as" => r.as_kind = Some(v),
                    "g" => r.group = Some(v),
                    "v" => r.version = Some(v),
                    "q" => {
                        r.q = v
                            .parse::<f32>()
                            .ok()
                            .filter(|q| (0.0..=1.0).contains(q))
                            .unwrap_or(1.0)
                    }
                    _ => {}
                }
            }
        }
        r
    }

    /// How specific the media type is: `*/*` < `type/*` < `type/subtype` (parameters do not
    /// count, as in kube-apiserver's ranking).
    fn specificity(&self) -> u8 {
        match self.media.split_once('/') {
            _ if self.media == "*/*" => 0,
            Some((_, "*")) => 1,
            _ => 2,
        }
    }

    /// Whether this range accepts the plain media type `offered` (`type/subtype`).
    fn accepts(&self, offered: &str) -> bool {
        let (kind, subtype) = offered.split_once('/').unwrap_or((offered, ""));
        let (want_kind, want_subtype) = self.media.split_once('/').unwrap_or((self.media.as_str(), ""));
        (want_kind == "*" || want_kind == kind) && (want_subtype == "*" || want_subtype == subtype)
    }

    /// The encoding this range asks for, if kuberaft writes it (`*/*` and `application/*` mean
    /// JSON, the first encoding kube-apiserver offers).
    fn encoding(&self) -> Option<Format> {
        match self.media.as_str() {
            "application/json" | "application/*" | "*/*" => Some(Format::Json),
            "application/yaml" => Some(Format::Yaml),
            crate::machinery::protobuf::MEDIA_TYPE => Some(Format::Protobuf),
            crate::machinery::cbor::MEDIA_TYPE => Some(Format::Cbor),
            _ => None,
        }
    }

    /// The version of an `as=<kind>;g=<group>` view, if this range asks for that view in one of
    /// `versions` and in one of the `encodings` the view is written in.
    fn view(
        &self,
        kinds: &[&str],
        group: &str,
        versions: &[&'static str],
        encodings: &[Format],
    ) -> Option<&'static str> {
        let kind = self.as_kind.as_deref()?;
        let encoded = self.encoding().is_some_and(|e| encodings.contains(&e));
        if !encoded || !kinds.contains(&kind) || self.group.as_deref() != Some(group) {
            return None;
        }
        versions
            .iter()
            .copied()
            .find(|v| self.version.as_deref() == Some(*v))
    }

    /// The format this range selects at an endpoint with `offer`, if any. The views come in
    /// the encodings kube-apiserver's endpoint restrictions allow them in: a Table in JSON or
    /// YAML, PartialObjectMetadata in any, aggregated discovery in JSON or protobuf.
    fn select(&self, offer: Offer) -> Option<Format> {
        use Format::{Cbor, Json, Protobuf, Yaml};
        if self.as_kind.is_some() {
            let meta_versions = &["v1", "v1beta1"];
            return match offer {
                Offer::Resource => self
                    .view(&["Table"], "meta.k8s.io", meta_versions, &[Json, Yaml])
                    .map(Format::Table)
                    .or_else(|| {
                        self.view(
                            &["PartialObjectMetadata", "PartialObjectMetadataList"],
                            "meta.k8s.io",
                            meta_versions,
                            &[Json, Yaml, Protobuf, Cbor],
                        )
                        .map(Format::Metadata)
                    }),
                Offer::GroupList => self
                    .view(
                        &["APIGroupDiscoveryList"],
                        "apidiscovery.k8s.io",
                        &["v2", "v2beta1"],
                        &[Json, Protobuf],
                    )
                    .map(Format::AggregatedDiscovery),
                Offer::Discovery => None,
            };
        }
        self.encoding()
    }
}

/// The ranges of the request's `Accept` header (`*/*` when absent or empty) in the order the
/// client prefers them: by quality, then by specificity, then as written (the order
/// kube-apiserver's negotiation ranks them in). Ranges of quality 0 are refusals and left out.
fn accepted(headers: &HeaderMap) -> Vec<MediaRange> {
    let accept = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .unwrap_or("*/*");
    let mut ranges: Vec<MediaRange> = accept
        .split(',')
        .map(MediaRange::parse)
        .filter(|r| r.q > 0.0)
        .collect();
    if ranges.len() > 1 {
        ranges.sort_by(|a, b| b.q.total_cmp(&a.q).then(b.specificity().cmp(&a.specificity())));
    }
    ranges
}

/// Chooses the response format of a resource or discovery endpoint from the `Accept` header:
/// the client's most preferred range this endpoint can serve; `406` when there is none.
pub fn negotiate(headers: &HeaderMap, offer: Offer) -> ApiResult<Format> {
    negotiate_encoded(headers, offer).map(|(format, _)| format)
}

/// [`negotiate`], with the encoding the chosen range asked for: the format itself for plain
/// objects, and JSON, YAML, protobuf or CBOR for a view (Table, PartialObjectMetadata,
/// aggregated discovery).
pub fn negotiate_encoded(headers: &HeaderMap, offer: Offer) -> ApiResult<(Format, Format)> {
    accepted(headers)
        .iter()
        .find_map(|range| Some((range.select(offer)?, range.encoding()?)))
        .ok_or_else(ApiError::not_acceptable)
}

/// Chooses among plain media types (`offered`, in the server's order): the client's most
/// preferred range that accepts one of them (as the OpenAPI endpoints negotiate).
pub fn choose<'a>(headers: &HeaderMap, offered: &[&'a str]) -> Option<&'a str> {
    accepted(headers)
        .iter()
        .find_map(|range| offered.iter().copied().find(|o| range.accepts(o)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers_pick_the_first_supported_format() {
        let h = |v: &str| {
            let mut m = HeaderMap::new();
            m.insert(axum::http::header::ACCEPT, v.parse().unwrap());
            m
        };
        let negotiate_resource = |h: &HeaderMap| negotiate(h, Offer::Resource);
        let kubectl_get = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(negotiate_resource(&h(kubectl_get)).unwrap(), Format::Table("v1"));
        assert_eq!(negotiate_resource(&h("application/yaml")).unwrap(), Format::Yaml);
        assert_eq!(
            negotiate_resource(&h(
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
            ))
            .unwrap(),
            Format::Json
        );
        assert_eq!(negotiate_resource(&h("text/html")).unwrap_err().code, 406);
        assert_eq!(
            negotiate_resource(&h("application/yaml;q=0, application/json")).unwrap(),
            Format::Json
        );
        assert_eq!(negotiate_resource(&HeaderMap::new()).unwrap(), Format::Json);
        // Quality ranks before order, as in kube-apiserver.
        assert_eq!(
            negotiate_resource(&h("application/yaml;q=0.5, application/json")).unwrap(),
            Format::Json
        );
        assert_eq!(
            negotiate_resource(&h("*/*;q=0.8, application/yaml")).unwrap(),
            Format::Yaml
        );
        let metadata = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
        assert_eq!(negotiate_resource(&h(metadata)).unwrap(), Format::Metadata("v1"));
        assert_eq!(
            negotiate_resource(&h("application/vnd.kubernetes.protobuf")).unwrap(),
            Format::Protobuf
        );
        assert_eq!(negotiate_resource(&h("application/cbor")).unwrap(), Format::Cbor);
        assert_eq!(
            negotiate_resource(&h("application/json;q=0.9, application/cbor")).unwrap(),
            Format::Cbor
        );
        assert_eq!(
            negotiate_resource(&h("application/cbor;q=0.5, application/json")).unwrap(),
            Format::Json
        );
        // Discovery documents come in every encoding, as kube-apiserver's codecs write them.
        assert_eq!(
            negotiate(&h("application/cbor"), Offer::Discovery).unwrap(),
            Format::Cbor
        );
        // Views in the encodings kube's endpoint restrictions allow: PartialObjectMetadata in
        // any, a Table in JSON or YAML only (a protobuf Table falls through to the next range).
        let metadata_pb = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
        assert_eq!(
            negotiate_encoded(&h(metadata_pb), Offer::Resource).unwrap(),
            (Format::Metadata("v1"), Format::Protobuf)
        );
        assert_eq!(
            negotiate_encoded(
                &h("application/yaml;as=Table;g=meta.k8s.io;v=v1"),
                Offer::Resource
            )
            .unwrap(),
            (Format::Table("v1"), Format::Yaml)
        );
        assert_eq!(
            negotiate_encoded(
                &h("application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1,application/json"),
                Offer::Resource
            )
            .unwrap(),
            (Format::Json, Format::Json)
        );
        assert_eq!(
            negotiate_encoded(
                &h("application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"),
                Offer::GroupList
            )
            .unwrap(),
            (Format::AggregatedDiscovery("v2"), Format::Protobuf)
        );
        assert_eq!(
            negotiate(
                &h("application/cbor;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"),
                Offer::GroupList
            )
            .unwrap_err()
            .code,
            406
        );

        // What kubectl sends for /api and /apis.
        let discovery = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(
            negotiate(&h(discovery), Offer::GroupList).unwrap(),
            Format::AggregatedDiscovery("v2")
        );
        assert_eq!(negotiate(&h(discovery), Offer::Discovery).unwrap(), Format::Json);
        assert_eq!(
            negotiate(&h(kubectl_get), Offer::GroupList).unwrap(),
            Format::Json
        );
        assert_eq!(
            negotiate(&h("application/vnd.kubernetes.protobuf"), Offer::Discovery).unwrap(),
            Format::Protobuf
        );
    }
}
