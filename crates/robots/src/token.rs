//! Product tokens (RFC 9309 §2.2.1): which tokens are valid, and the one a
//! `User-Agent` header names.

/// Whether `token` is a product token a crawler can obey rules for
/// (RFC 9309 §2.2.1: `[a-zA-Z_-]+`; Google's `IsValidUserAgentToObey`).
pub fn is_valid_product_token(token: &str) -> bool {
    !token.is_empty() && token.bytes().all(|b| b.is_ascii_alphabetic() || b == b'-' || b == b'_')
}

/// Derives the product token from a full `User-Agent` header value: the
/// name of its first product (RFC 9110 §10.1.5), when that is a valid
/// product token ([`is_valid_product_token`]) and not the generic `Mozilla`
/// of browser-style strings.
///
/// `ExampleBot/2.1 (+http://example.org)` gives `ExampleBot`;
/// `Mozilla/5.0 (compatible; ExampleBot/2.1; ...)` gives `None` (the token is
/// somewhere in the comment and has to come from configuration), as do
/// `Bot2/1.0` (digits are not allowed in a token) and an empty value.
pub fn product_token_from_user_agent(user_agent: &str) -> Option<String> {
    let ua = user_agent.trim_start_matches([' ', '\t']);
    let end = ua.find(['/', ' ', '\t', ';', '(']).unwrap_or(ua.len());
    let name = &ua[..end];
    (is_valid_product_token(name) && !name.eq_ignore_ascii_case("mozilla")).then(|| name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn product_token_from_user_agent_takes_first_product_name() {
        assert_eq!(
            product_token_from_user_agent("ExampleBot/2.1 (+http://example.org)").as_deref(),
            Some("ExampleBot")
        );
        assert_eq!(product_token_from_user_agent("examplebot").as_deref(), Some("examplebot"));
        assert_eq!(
            product_token_from_user_agent("Example-Bot_x (x)").as_deref(),
            Some("Example-Bot_x")
        );
        assert_eq!(
            product_token_from_user_agent(
                "Mozilla/5.0 (compatible; ExampleBot/2.1; +http://e.org)"
            ),
            None
        );
        assert_eq!(product_token_from_user_agent("Bot2/1.0"), None);
        assert_eq!(product_token_from_user_agent(""), None);
    }
}
