//! What the tests create and compare with: phone numbers of each pool, the
//! number ranges of a test configuration, a create body, and the exact
//! texts of the Django REST Framework answers the API reproduces.
//!
//! Not for: checks (see [`super::checks`]).

use serde_json::{json, Value};

/// A valid Russian mobile number (domestic pool).
pub const RU_PHONE: &str = "+79123456789";
/// A valid Kazakh mobile number (domestic pool, +7 too).
pub const KZ_PHONE: &str = "+77011234567";
/// A valid UK mobile number (international pool).
pub const UK_PHONE: &str = "+447911123456";
/// A public IP literal: passes the SSRF guard without any DNS.
pub const WEBHOOK: &str = "https://93.184.216.34/hook";

/// First number of the domestic range built by [`pools`].
pub const DOMESTIC_START: u64 = 74_950_000_000;
/// First number of the international range built by [`pools`].
pub const INTERNATIONAL_START: u64 = 442_030_000_000;

pub const COLLECTION: &str = "/api/v1/verifications/";

pub const REQUIRED: &str = "Обязательное поле.";
pub const INVALID_PHONE: &str = "Введите корректный номер телефона.";
pub const INVALID_URL: &str = "Введите правильный URL.";
pub const INVALID_INTEGER: &str = "Введите правильное число.";
pub const NOT_FOUND: &str = "Страница не найдена.";
pub const NOT_AUTHENTICATED: &str = "Учетные данные не были предоставлены.";
pub const INVALID_KEY: &str = "Недействительный API-ключ.";
/// The body of every 500 (DRF's text).
pub const SERVER_ERROR: &str = "Произошла ошибка сервера.";
pub const NOT_A_DICT_LIST: &str = "Недопустимые данные. Ожидался dictionary, но был получен list.";

pub fn max_length(n: usize) -> String {
    format!("Убедитесь, что это значение содержит не более {n} символов.")
}
pub fn min_value(n: i64) -> String {
    format!("Убедитесь, что это значение больше либо равно {n}.")
}
pub fn max_value(n: i64) -> String {
    format!("Убедитесь, что это значение меньше либо равно {n}.")
}
pub fn method_not_allowed(m: &str) -> String {
    format!("Метод \"{m}\" не разрешен.")
}
/// DRF's throttle text ("1 second." in the singular).
pub fn throttled(n: u64) -> String {
    let unit = if n == 1 { "second" } else { "seconds" };
    format!("Запрос был проигнорирован. Expected available in {n} {unit}.")
}

/// The domestic numbers of a [`pools`] configuration with `n` of them.
pub fn domestic_numbers(n: u64) -> Vec<String> {
    (0..n).map(|i| format!("+{}", DOMESTIC_START + i)).collect()
}
/// The international numbers of a [`pools`] configuration with `n` of them.
pub fn international_numbers(n: u64) -> Vec<String> {
    (0..n)
        .map(|i| format!("+{}", INTERNATIONAL_START + i))
        .collect()
}

/// `[[lines]]` TOML: one always-up line with `domestic` + `international`
/// numbers (either may be 0).
pub fn pools(domestic: u64, international: u64) -> String {
    let mut entries = Vec::new();
    if domestic > 0 {
        entries.push(format!(
            "  {{ range_start = \"+{DOMESTIC_START}\", count = {domestic}, pool = \"domestic\" }},"
        ));
    }
    if international > 0 {
        entries.push(format!(
            "  {{ range_start = \"+{INTERNATIONAL_START}\", count = {international}, pool = \"international\" }},"
        ));
    }
    format!(
        "[[lines]]\nname = \"test\"\nmode = \"always_up\"\nnumbers = [\n{}\n]\n",
        entries.join("\n")
    )
}

/// `{"phone": phone, "webhook_url": WEBHOOK}`.
pub fn body(phone: &str) -> Value {
    json!({ "phone": phone, "webhook_url": WEBHOOK })
}
