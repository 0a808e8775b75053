//! Decoding a request body (JSON, YAML or Kubernetes protobuf) into a JSON value, noting
//! duplicate fields for field validation.

use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::field_validation::{decode_tracking_duplicates, Decoded};

/// Decodes a JSON, YAML or Kubernetes protobuf body into a JSON value, noting duplicate fields
/// for field validation (YAML through yaml_serde, whose alias expansion and nesting are
/// bounded; JSON nesting is bounded by serde_json).
pub fn decode_body(content_type: &str, body: &[u8]) -> ApiResult<Decoded> {
    match content_type {
        "" | "application/json" => {
            let mut de = serde_json::Deserializer::from_slice(body);
            decode_tracking_duplicates(&mut de)
                .and_then(|decoded| de.end().map(|()| decoded))
                .map_err(|e| {
                    ApiError::bad_request(format!(
                        "the body of the request could not be decoded as JSON: {e}"
                    ))
                })
        }
        "application/yaml" | "application/x-yaml" | "text/yaml" => {
            decode_tracking_duplicates(yaml_serde::Deserializer::from_slice(body)).map_err(|e| {
                ApiError::bad_request(format!(
                    "the body of the request could not be decoded as YAML: {e}"
                ))
            })
        }
        crate::machinery::protobuf::MEDIA_TYPE => Ok(Decoded {
            value: crate::machinery::protobuf::decode_request(body)?,
            duplicates: Vec::new(),
        }),
        other => Err(ApiError::unsupported_media_type(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_decode_or_fail_with_the_right_status() {
        assert_eq!(decode_body("application/yaml", b"a: 1").unwrap().value["a"], 1);
        assert_eq!(decode_body("application/json", b"{").unwrap_err().code, 400);
        assert_eq!(decode_body("application/json", b"{} {}").unwrap_err().code, 400);
        assert_eq!(decode_body("text/plain", b"x").unwrap_err().code, 415);
        let deep = "[".repeat(10_000);
        assert_eq!(
            decode_body("application/json", deep.as_bytes()).unwrap_err().code,
            400
        );
        let bomb = "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\ni: [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n";
        assert_eq!(
            decode_body("application/yaml", bomb.as_bytes()).unwrap_err().code,
            400
        );
    }
}
